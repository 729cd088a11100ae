#!/usr/bin/env bash
# Session 18, call 2: where qmv's time goes on the 33-50 MB shapes (timing only; these variants
# compute wrong bytes on purpose): exactq-x1 skips x's staging, -x2 replaces the dot by an xor of
# the loaded words, -x3 both; against main, plain and overlapped launches, same call.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session18b
shapes=262144x3840,128256x4096,28672x8192,15360x3840,3840x15360,17408x5120,14336x4096
ab_qmv_m1 2 "$shapes" "${exes[@]}"
echo "== overlapped"
ovl_qmv_m1 "$shapes" "${exes[@]}"
grep -h -i "ceiling\|size-matched\|read" "$out"/qmv_exactq_1.log | head -20
