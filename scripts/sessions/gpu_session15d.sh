#!/usr/bin/env bash
# Session 15, the record run on the final build (the carried first round at 4, 5 and 6 bits):
# scripts/gpu_final.sh (tests, parity, sanitizers, every kernel on every preset at M = 1, 4, 16,
# the other widths, overlapped launches, PyTorch anchors), then racecheck on a split last trip.
set -uo pipefail
BENCH_M=${BENCH_M:-1,4,16} "$(dirname "$0")/../gpu_final.sh"
export PATH=/usr/local/cuda/bin:$PATH
final=${OUT:-/tmp/exactq-out}
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 .out/bin/exactq parity --backend cuda --kernels qmv \
  --n 11651 --k 4416 --bits 5 --group 64 --dtype bf16 --m-max 2 --seeds 1 >"$final/racecheck_split.log" 2>&1
echo "racecheck (split last trip, 5-bit 11651x4416): exit $? $(grep -E 'RACECHECK SUMMARY' "$final/racecheck_split.log" | tail -1)"
