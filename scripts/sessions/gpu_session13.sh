#!/usr/bin/env bash
# Session 13's device call, with about four minutes of device time left: the checks first, then a
# short benchmark, the sanitizer last, so that whatever the time cut leaves is the most needed.
# Needs .out/bin (scripts/build_for_gpu.sh). Logs go straight under $OUT as they are written.
set -uo pipefail
bin=.out/bin
"$(dirname "$0")/../gpu_unpack.sh"
out=${OUT:-/tmp/exactq-out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
# 1. qmv_mma at every width: width invariance to M = 64, float64 accuracy, one-hot exactness.
"$bin/exactq_cuda_tests" --gtest_filter='CudaQmvMma.*:MmaProbe.*' >"$out/mma_tests.log" 2>&1
echo "qmv_mma tests: exit $? $(grep -E '^\[  (PASSED|FAILED)' "$out/mma_tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|info' "$out/mma_tests.log" | cut -c1-160 | head -40
# 2. parity at the new widths (qmv_mma to its own chain, qmv against the CPU mirror).
for spec in "2 64 bf16" "3 32 f16" "5 128 bf16" "6 64 f16"; do
  read -r b g d <<<"$spec"
  "$bin/exactq" parity --backend cuda --against cpu --kernels qmv,qmv_mma --n 4099 --k 3840 --bits "$b" --group "$g" \
    --dtype "$d" --m-max 20 --seeds 1 >>"$out/parity.log" 2>&1
  echo "parity $b-bit g$g $d: exit $? $(tail -1 "$out/parity.log" | cut -c1-110)"
done
# 3. qmv where the L2 prefetch is on (>= 8 trips per warp): against the CPU mirror.
"$bin/exactq" parity --backend cuda --against cpu --kernels qmv,qmv_wide --n 70001 --k 4096 --bits 4 --group 64 \
  --dtype bf16 --m-max 2 --seeds 1 >>"$out/parity.log" 2>&1
echo "parity prefetch 70001x4096: exit $? $(tail -1 "$out/parity.log" | cut -c1-110)"
# 4. speed at the new widths, qmv beside qmv_mma.
for b in 3 6 2 5; do
  "$bin/exactq" bench --backend cuda --shapes 28672x8192,15360x3840 --m 1,4,16 --kernels qmv,qmv_mma --bits "$b" \
    --group 64 --dtype bf16 --repeats 10 --json "$out/bench_${b}bit.json" >"$out/bench_${b}bit.log" 2>&1
  echo "bench $b-bit: exit $?"
  grep -E "ceiling|^2867|^1536" "$out/bench_${b}bit.log" | tr -s ' ' | cut -c1-120
done
# 5. memcheck on the new widths' kernels.
compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/exactq_cuda_tests" \
  --gtest_filter='CudaQmvMma.AccuracyAgainstFloat64AndCpuReference:CudaQmvMma.RejectsWhatItDoesNotServe' \
  >"$out/memcheck.log" 2>&1
echo "memcheck: exit $? $(grep -E 'ERROR SUMMARY' "$out/memcheck.log" | tail -1)"
