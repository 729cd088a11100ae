#!/usr/bin/env bash
# Session 20, call 1: session 19's call 1 split after a device call was taken back mid-run (the
# whole call's output is lost then). This part: timing only, qmv at M = 1 over two passes, plain
# and overlapped, on ten shapes, for main and the six variants (w16, fs, bal and combinations;
# what each is: scripts/sessions/gpu_session19.sh). The bytes (tests, parity) and qmv_streamed's
# sweep followed in gpu_session20c.sh and gpu_session20d.sh. Binaries as gpu_session19.sh (carry [".out/bin"]).
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session20
shapes=262144x3840,128256x4096,28672x8192,15360x3840,3840x15360,14336x4096,4096x14336,17408x5120,5120x17408,5120x5120
echo "== qmv, M = 1"
ab_qmv_m1 2 "$shapes" "${exes[@]}"
echo "(${SECONDS}s elapsed)"
echo "== overlapped"
if time_left 90; then ovl_qmv_m1 "$shapes" "${exes[@]}"; else echo "skipped: ${SECONDS}s elapsed"; fi
grep -h "ceiling" "$out"/qmv_exactq_1.log | head -3
echo "(${SECONDS}s elapsed)"
