#!/usr/bin/env bash
# Session 16, the last call: the merged butterflies in qmv_streamed as the default. Every CUDA test,
# parity (all kernels to M = 64), memcheck and racecheck (scripts/gpu_final.sh without its bench),
# racecheck on qmv_streamed at V = 2..8 over several trips, then qmv, qmv_streamed and qmv_wide
# at M = 2, 4, 8 on the large shapes (the recovered fraction).
set -uo pipefail
SKIP_BENCH=1 "$(dirname "$0")/../gpu_final.sh"
export PATH=/usr/local/cuda/bin:$PATH
extra=$(mktemp -d)
trap 'tar czf "${OUT:-/tmp/exactq-out}/session16d.tgz" -C "$extra" .' EXIT
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 .out/bin/exactq parity --backend cuda \
  --kernels qmv_streamed,qmv_wide --n 11651 --k 4416 --bits 4 --group 64 --dtype bf16 --m-max 8 --seeds 1 \
  >"$extra/racecheck_streamed.log" 2>&1
echo "racecheck (qmv_streamed V = 2..8, several trips): exit $? $(grep -E 'RACECHECK SUMMARY' "$extra/racecheck_streamed.log" | tail -1)"
.out/bin/exactq bench --backend cuda --shapes 28672x8192,262144x3840,15360x3840,3840x15360 --m 2,4,8 \
  --kernels qmv,qmv_streamed,qmv_wide --bits 4 --group 64 --dtype bf16 --repeats 20 --json "$extra/streamed.json" \
  --markdown "$extra/streamed.md" >"$extra/streamed.log" 2>&1
echo "bench exit $?"
grep -E "ceiling|qmv_streamed" "$extra/streamed.log" | head -20
