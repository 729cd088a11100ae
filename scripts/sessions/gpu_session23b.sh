#!/usr/bin/env bash
# Session 23, call 2: the record of the binaries in .out/bin (main, or main with a winning 4-bit
# qmv default), the first run of session 22's CUDA tests (negative controls in every equality
# test against the CPU mirror, the mma probe on all eight columns, the error messages).
# Each part is skipped where it might not finish in the call (CALL_BUDGET, default 570 s), most
# needed first: every CUDA test, memcheck and racecheck, parity of all four kernels, the bench of
# all four kernels on every preset at M = 1-5, 8, 16, then qmv_streamed on Llama's head at M = 8, 16
# again (session 20's record had M = 16 there out of line).
# Built: GENCODE=sm_90a scripts/build_for_gpu.sh. Run with carry [".out/bin"].
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session23b
t=$bin/exactq_cuda_tests
timeout 240 "$t" >"$out/cuda_tests.log" 2>&1
echo "cuda tests: rc $? $(grep -E '^\[  (PASSED|FAILED)' "$out/cuda_tests.log" | tr '\n' ' ') (${SECONDS}s)"
grep -E "^\[  FAILED|control" "$out/cuda_tests.log" | head -20
filter='CudaQmv.EqualsCpuMirrorForEveryFormat:CudaQmv.WidthInvariantWithNegativeControl:CudaQmv.RejectsBadArguments:CudaQmvMma.RejectsWhatItDoesNotServe:CudaQmvMma.FragmentLayoutGivesTheMlxLayoutsBytes'
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
  awk '$4=="qmv" && $5==1 {printf "%s %s %s; ", $1, $6, $8} END {print ""}' "$out/bench.log"
fi
for pass in 1 2; do
  time_left 25 || { echo "skipped llama head again ($pass)"; continue; }
  timeout 20 "$bin/exactq" bench --backend cuda --shapes 128256x4096 --m 8,16 --kernels qmv_streamed --bits 4 --group 64 \
    --dtype bf16 --repeats 20 >"$out/bench_llama_head_m16_$pass.log" 2>&1
  echo "llama head qmv_streamed again ($pass): $(awk '$4=="qmv_streamed" {printf "M=%s %s us; ", $5, $6}' "$out/bench_llama_head_m16_$pass.log")"
done
echo "(${SECONDS}s elapsed)"
