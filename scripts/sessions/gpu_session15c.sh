#!/usr/bin/env bash
# Session 15, call 6: the build with the carried first round at 4 bits (the new default): every
# CUDA test, memcheck and racecheck on qmv's tests (several trips, split last trips), then the
# other widths with the carry built in (exactq-carry_all) against the default, and the L2
# prefetch on the heads under the carry. Logs archived as $OUT/session15c.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session15c
"$bin/exactq_cuda_tests" >"$out/cuda_tests.log" 2>&1
echo "cuda tests: exit $? $(grep -E '^\[  (PASSED|FAILED)' "$out/cuda_tests.log" | tr '\n' ' ')"
grep -E "^\[  FAILED" "$out/cuda_tests.log" | head
filter='CudaQmv.EqualsCpuMirrorOverSeveralTrips:CudaQmv.EqualsCpuMirrorForEveryFormat:CudaQmv.OverlappedChainedLaunchesEqualCpuMirror'
for tool in memcheck racecheck; do
  timeout 240 compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/exactq_cuda_tests" --gtest_filter="$filter" \
    >"$out/sanitizer_$tool.log" 2>&1
  echo "$tool: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$tool.log" | tail -1)"
done
for b in 2 3 5 6 8; do
  for exe in "$bin/exactq" "$bin/exactq-carry_all"; do
    name=$(basename "$exe")
    "$exe" bench --backend cuda --shapes 262144x3840,128256x4096,28672x8192,17408x5120 --m 1 --kernels qmv --bits "$b" \
      --group 64 --dtype bf16 --repeats 30 --json "$out/b${b}_$name.json" >"$out/b${b}_$name.log" 2>&1
    printf '%-18s %s-bit: %s\n' "$name" "$b" "$(awk '$4=="qmv" && $5==1 {printf "%s %s %s; ", $1, $6, $8}' "$out/b${b}_$name.log")"
  done
done
"$bin/exactq" bench --backend cuda --shapes 262144x3840,128256x4096,28672x8192 --m 1 --kernels qmv --bits 4 --group 64 \
  --dtype bf16 --repeats 30 --sweep-qmv-tuning -1:-1,0:-1,1:-1,2:-1,3:-1 --json "$out/prefetch.json" >"$out/prefetch.log" 2>&1
echo "== 4-bit prefetch sweep under the carry"
awk '$4=="qmv" && $5==1 {printf "%-12s %7s %6s %s\n", $1, $6, $8, substr($0, index($0, "prefetch"))}' "$out/prefetch.log"
