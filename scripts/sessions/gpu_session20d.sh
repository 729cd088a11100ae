#!/usr/bin/env bash
# Session 20, call 4: the record of the new defaults (qmv_streamed: passes of Vmax then the rest,
# Vmax 4 on many rows, V = 5 at one block per SM, x staged by stage_integers_fast; qmv as before,
# the balanced path and the fast-staging knob removed), and one more streamed variant:
#   st   x's tile sized by the blocks per SM the registers allow (EXACTQ_STREAMED_WHOLE_SM_TILES=1:
#        at V = 8, K = 8192 in one tile instead of four, each re-staged on every trip).
# Each part is skipped where it might not finish in the call (CALL_BUDGET: the device time left),
# most needed first: every CUDA test, the A/B of st, st's qmv tests, memcheck and racecheck,
# parity of all four kernels, the bench at M = 1-5, 8, 16.
# Built: GENCODE=sm_90a scripts/build_for_gpu.sh; TESTS=1 TUS=qmv_streamed
# scripts/build_qmv_variant.sh st "-DEXACTQ_STREAMED_WHOLE_SM_TILES=1"; scripts/pack_variants.sh.
# Run with carry [".out/bin"].
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session20d
t=$bin/exactq_cuda_tests
timeout 200 "$t" >"$out/cuda_tests.log" 2>&1
echo "cuda tests: rc $? $(grep -E '^\[  (PASSED|FAILED)' "$out/cuda_tests.log" | tr '\n' ' ') (${SECONDS}s)"
grep -E "^\[  FAILED" "$out/cuda_tests.log" | head -20
shapes=3840x15360,15360x3840,28672x8192,262144x3840,128256x4096,5120x17408
for exe in "$bin/exactq" "$bin/exactq-st"; do
  name=$(basename "$exe")
  time_left 60 || { echo "skipped $name: ${SECONDS}s elapsed"; continue; }
  timeout 60 "$exe" bench --backend cuda --shapes "$shapes" --m 2-8,16 --kernels qmv_streamed --bits 4 --group 64 \
    --dtype bf16 --repeats 20 --json "$out/streamed_$name.json" >"$out/streamed_$name.log" 2>&1
  echo "$name: exit $?"
  for s in ${shapes//,/ }; do
    awk -v s="$s" '$1==s && $4=="qmv_streamed" {printf "%s=%s ", $5, $6}' "$out/streamed_$name.log"
    echo " ($s)"
  done
done
if time_left 100; then
  timeout 90 "$bin/exactq_cuda_tests-st" --gtest_filter='CudaQmv.*' >"$out/cuda_tests_st.log" 2>&1
  echo "st's CudaQmv tests: rc $? $(grep -E '^\[  (PASSED|FAILED)' "$out/cuda_tests_st.log" | tr '\n' ' ') (${SECONDS}s)"
fi
filter='CudaQmv.EqualsCpuMirrorForEveryFormat:CudaQmv.WidthInvariantWithNegativeControl:CudaQmv.RejectsBadArguments:CudaQmvMma.RejectsWhatItDoesNotServe'
for tool in memcheck racecheck; do
  time_left 130 || { echo "skipped $tool: ${SECONDS}s"; continue; }
  f=$filter
  [[ $tool == memcheck ]] && f+=':CudaQmv.OverlappedChainedLaunchesEqualCpuMirror'
  timeout 125 compute-sanitizer --tool "$tool" --error-exitcode 9 "$t" --gtest_filter="$f" >"$out/sanitizer_$tool.log" 2>&1
  echo "$tool: rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$tool.log" | tail -1) (${SECONDS}s)"
done
for spec in "4 64 bf16 4096 3840" "8 128 f16 1031 4096" "3 64 bf16 70001 1024" "5 64 f32 2048 3840"; do
  time_left 45 || { echo "skipped parity $spec"; continue; }
  read -r b g d n k <<<"$spec"
  timeout 40 "$bin/exactq" parity --backend cuda --against cpu --kernels qmv,qmv_streamed,qmv_wide,qmv_mma --n "$n" --k "$k" \
    --bits "$b" --group "$g" --dtype "$d" --m-max 20 --seeds 1 >>"$out/parity.log" 2>&1
  echo "parity $spec: exit $? (${SECONDS}s)"
done
if time_left 100; then
  timeout 95 "$bin/exactq" bench --backend cuda --shapes gemma12b,llama3-8b,qwen27b,big --m 1-5,8,16 \
    --kernels qmv,qmv_streamed,qmv_wide,qmv_mma --bits 4 --group 64 --dtype bf16 --repeats 20 \
    --json "$out/bench.json" --markdown "$out/bench.md" --plot "$out/bench.svg" >"$out/bench.log" 2>&1
  echo "bench: exit $? (${SECONDS}s)"
  grep -E "ceiling" "$out/bench.log" | head -3
fi
