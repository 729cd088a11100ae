#!/usr/bin/env bash
# Session 20, call 1: session 19's call 1 split after a device call was taken back mid-run (the
# whole call's output is lost then). This part: timing only, qmv at M = 1 over two passes, plain
# and overlapped, on ten shapes, for main and the six variants (w16, fs, bal and combinations;
# what each is: scripts/sessions/gpu_session19.sh). The bytes (tests, parity) and qmv_streamed's
# sweep followed in gpu_session20c.sh and gpu_session20d.sh. Binaries as gpu_session19.sh (carry [".out/bin"]).
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session20
qmv_m1_section "${exes[@]}"
echo "(${SECONDS}s elapsed)"
