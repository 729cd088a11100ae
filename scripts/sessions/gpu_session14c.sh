#!/usr/bin/env bash
# Session 14, third call: the split of a partial last trip (run-time knob) and the prefetch code
# without its next-task branch: the CUDA suite, the A/B against the previous build
# (.out/bin/exactq-base) in the same call, and the sanitizers on the split path.
# Logs as $OUT/session14c.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session14c
"$bin/exactq_cuda_tests" >"$out/cuda_tests.log" 2>&1
echo "cuda tests: exit $? $(grep -E '^\[  (PASSED|FAILED)' "$out/cuda_tests.log" | tr '\n' ' ')"
grep -E "^\[  FAILED" "$out/cuda_tests.log" | head
shapes=${AB_SHAPES:-28672x8192,262144x3840,128256x4096,15360x3840,3840x15360,17408x5120,5120x17408}
for round in 1 2; do
  for b in 4 8 2; do
    "$bin/exactq" bench --backend cuda --shapes "$shapes" --m 1 --kernels qmv --bits $b --group 64 --dtype bf16 \
      --repeats 30 --sweep-qmv-tuning -1:-1,-1:0 --json "$out/new_${b}bit_$round.json" >"$out/new_${b}bit_$round.log" 2>&1
    "$bin/exactq-base" bench --backend cuda --shapes "$shapes" --m 1 --kernels qmv --bits $b --group 64 --dtype bf16 \
      --repeats 30 --json "$out/base_${b}bit_$round.json" >"$out/base_${b}bit_$round.log" 2>&1
    echo "== $b-bit round $round: $(grep ceiling "$out/new_${b}bit_$round.log")"
    awk '$4=="qmv" && $5==1 {printf "new  %-12s %7s %6s %s\n", $1, $6, $8, substr($0, index($0, "prefetch"))}' "$out/new_${b}bit_$round.log"
    awk '$4=="qmv" && $5==1 {printf "base %-12s %7s %6s\n", $1, $6, $8}' "$out/base_${b}bit_$round.log"
  done
  [[ ${AB_ROUNDS:-1} == 1 ]] && break
done
"$bin/exactq" parity --backend cuda --against cpu --kernels qmv,qmv_streamed,qmv_wide --n 11651 --k 4416 --bits 4 \
  --group 64 --dtype bf16 --m-max 6 --seeds 1 >"$out/parity.log" 2>&1
echo "parity (several trips, last split) exit $?: $(tail -1 "$out/parity.log" | cut -c1-150)"
for tool in racecheck memcheck; do
  timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/exactq" parity --backend cuda --kernels qmv \
    --n 11651 --k 4416 --bits 4 --group 64 --dtype bf16 --m-max 2 --seeds 1 >"$out/sanitizer_$tool.log" 2>&1
  echo "$tool (split last trip, 11651x4416): exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$tool.log" | tail -1)"
done
