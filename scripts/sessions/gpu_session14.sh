#!/usr/bin/env bash
# Session 14's first device call: the whole CUDA suite on the new build (session 13's untested
# host dispatch and the L2 prefetch knobs), then the prefetch sweep (one binary, run-time knobs),
# the A/B against a build with the prefetch compiled out (.out/bin/exactq-nopf, if present), ncu
# on 4- and 2-bit qmv, and the sanitizers last. Logs archived as $OUT/session14.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session14
# 1. Every CUDA test.
"$bin/exactq_cuda_tests" >"$out/cuda_tests.log" 2>&1
echo "cuda tests: exit $? $(grep -E '^\[  (PASSED|FAILED)' "$out/cuda_tests.log" | tr '\n' ' ')"
grep -E "^\[  FAILED" "$out/cuda_tests.log" | head
# 2. The prefetch sweep, ROUNDS:NEXT (-1 = the launcher's choice), 4 and 2 bits.
sweep=${SWEEP:--1:-1,0:0,1:0,2:0,3:0,4:0,6:0,1:1,2:1,3:1,4:1}
for b in 4 2; do
  "$bin/exactq" bench --backend cuda --shapes "${SWEEP_SHAPES:-28672x8192,262144x3840,128256x4096,15360x3840,3840x15360}" \
    --m 1 --kernels qmv --bits $b --group 64 --dtype bf16 --repeats 30 --sweep-qmv-l2-prefetch "$sweep" \
    --json "$out/sweep_${b}bit.json" >"$out/sweep_${b}bit.log" 2>&1
  echo "== sweep $b-bit: exit $? $(grep -E 'ceiling' "$out/sweep_${b}bit.log")"
  awk '$4=="qmv" && $5==1 {printf "%-12s %7s %6s %s\n", $1, $6, $8, substr($0, index($0, "prefetch"))}' "$out/sweep_${b}bit.log"
done
# 2b. The same knobs for qmv_mma (fragment layout) at M = 1 and 16.
for b in 4 2; do
  "$bin/exactq" bench --backend cuda --shapes "${MMA_SWEEP_SHAPES:-28672x8192,262144x3840,15360x3840}" \
    --m 1,16 --kernels qmv_mma --bits $b --group 64 --dtype bf16 --repeats 30 \
    --sweep-qmv-l2-prefetch "${MMA_SWEEP:--1:-1,1:0,2:0,3:0,4:0,1:1,2:1,4:1}" \
    --json "$out/mma_sweep_${b}bit.json" >"$out/mma_sweep_${b}bit.log" 2>&1
  echo "== qmv_mma sweep $b-bit: exit $?"
  awk '$4=="qmv_mma" {printf "%-12s M=%-2s %7s %6s %s\n", $1, $5, $6, $8, substr($0, index($0, "prefetch"))}' "$out/mma_sweep_${b}bit.log"
done
# 3. The A/B of session 13 §2: the same shapes through a build without the prefetch code.
for exe in "$bin"/exactq-*; do
  [[ -x $exe ]] || continue
  name=$(basename "$exe")
  for b in 4 2; do
    "$exe" bench --backend cuda --shapes 28672x8192,262144x3840,15360x3840 --m 1 --kernels qmv --bits $b --group 64 \
      --dtype bf16 --repeats 30 --json "$out/${name}_${b}bit.json" >"$out/${name}_${b}bit.log" 2>&1
    echo "== $name $b-bit: $(awk '$4=="qmv" && $5==1 {printf "%s %s %s; ", $1, $6, $8}' "$out/${name}_${b}bit.log")"
  done
done
# 4. ncu: 4- and 2-bit qmv on 28672x8192, prefetch off (the launcher's choice there).
for b in 4 2; do
  "$(dirname "$0")/../gpu_ncu_stalls.sh" "qmv${b}_big" qmv_family 3 "$bin/exactq" bench --backend cuda --shapes 28672x8192 \
    --m 1 --kernels qmv --bits $b --group 64 --dtype bf16 --repeats 2 >"$out/ncu_summary_${b}.txt" 2>&1
  head -30 "$out/ncu_summary_${b}.txt"
done
"$(dirname "$0")/../gpu_ncu_stalls.sh" "mma2_big" qmv_mma_fragments 3 "$bin/exactq" bench --backend cuda --shapes 28672x8192 \
  --m 1 --kernels qmv_mma --bits 2 --group 64 --dtype bf16 --repeats 2 >"$out/ncu_summary_mma2.txt" 2>&1
head -30 "$out/ncu_summary_mma2.txt"
cp "$final"/ncu_*.txt "$out/" 2>/dev/null && rm -f "$final"/ncu_*.txt
# 5. Sanitizers on the kernels' tests (as gpu_final.sh) and on the multi-trip prefetch cases.
for tool in memcheck racecheck; do
  filter='CudaQmv.EqualsCpuMirrorForEveryFormat:CudaQmv.RejectsBadArguments:CudaQmvMma.AccuracyAgainstFloat64AndCpuReference:CudaQmvMma.RejectsWhatItDoesNotServe:CudaQmvMma.FragmentLayoutGivesTheMlxLayoutsBytes:CudaQmvMma.OddGroupCountAtEightBitsGroup128'
  [[ $tool == memcheck ]] && filter+=':CudaQmv.OverlappedChainedLaunchesEqualCpuMirror:CudaQmv.EqualsCpuMirrorOverSeveralTrips'
  timeout "${SANITIZER_TIMEOUT:-120}" compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/exactq_cuda_tests" \
    --gtest_filter="$filter" >"$out/sanitizer_$tool.log" 2>&1
  echo "$tool: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$tool.log" | tail -1)"
done
