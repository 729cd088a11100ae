#!/usr/bin/env bash
# Session 23, the H200 call (call 1 ran on an H100: main was the fastest of the six binaries on all
# five shapes there, 2-10 %; but there main already reads the heads at 96 % of the ceiling, so the
# bytes-in-flight question is the H200's, at 1.5x the bandwidth).
# Most needed first, each part skipped where it might not finish (CALL_BUDGET, default 570 s):
# 1. the A/B of call 1 (main and the five variants of scripts/sessions/gpu_session22.sh, qmv at
#    M = 1, two plain passes on five shapes);
# 2. the bench of all four kernels on every preset at M = 1-5, 8, 16 (the record);
# 3. every CUDA test of main; 4. memcheck and racecheck; 5. parity of all four kernels;
# 6. qmv_streamed on Llama's head at M = 8, 16 again.
# Built as session 22's call. Run with carry [".out/bin"].
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session23c
if grep -q H100 "$out/gpu.txt"; then
  echo "== an H100: the A/B ran there in call 1, skipped"
else
  echo "== qmv, M = 1"
  ab_qmv_m1 2 262144x3840,128256x4096,28672x8192,15360x3840,3840x15360 "${exes[@]}"
  grep -h "ceiling" "$out"/qmv_exactq_1.log | head -3
  echo "(${SECONDS}s elapsed)"
fi
if time_left 100; then
  timeout 95 "$bin/exactq" bench --backend cuda --shapes gemma12b,llama3-8b,qwen27b,big --m 1-5,8,16 \
    --kernels qmv,qmv_streamed,qmv_wide,qmv_mma --bits 4 --group 64 --dtype bf16 --repeats 20 \
    --json "$out/bench.json" --markdown "$out/bench.md" --plot "$out/bench.svg" >"$out/bench.log" 2>&1
  echo "bench: exit $? (${SECONDS}s)"
  grep -E "read ceiling" "$out/bench.log"
  awk '$4=="qmv" && $5==1 {printf "%s %s %s; ", $1, $6, $8} END {print ""}' "$out/bench.log"
fi
t=$bin/exactq_cuda_tests
if time_left 150; then
  timeout 145 "$t" >"$out/cuda_tests.log" 2>&1
  echo "cuda tests: rc $? $(grep -E '^\[  (PASSED|FAILED)' "$out/cuda_tests.log" | tr '\n' ' ') (${SECONDS}s)"
  grep -E "^\[  FAILED" "$out/cuda_tests.log" | head -20
fi
filter='CudaQmv.EqualsCpuMirrorForEveryFormat:CudaQmv.WidthInvariantWithNegativeControl:CudaQmv.RejectsBadArguments:CudaQmvMma.RejectsWhatItDoesNotServe:CudaQmvMma.FragmentLayoutGivesTheMlxLayoutsBytes'
for tool in memcheck racecheck; do
  time_left 130 || { echo "skipped $tool: ${SECONDS}s"; continue; }
  timeout 125 compute-sanitizer --tool "$tool" --error-exitcode 9 "$t" --gtest_filter="$filter" >"$out/sanitizer_$tool.log" 2>&1
  echo "$tool: rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$tool.log" | tail -1) (${SECONDS}s)"
done
record_parity "4 64 bf16 4096 3840" "8 128 f16 1031 4096" "3 64 bf16 70001 1024" "5 64 f32 2048 3840"
for pass in 1 2; do
  time_left 25 || { echo "skipped llama head again ($pass)"; continue; }
  timeout 20 "$bin/exactq" bench --backend cuda --shapes 128256x4096 --m 8,16 --kernels qmv_streamed --bits 4 --group 64 \
    --dtype bf16 --repeats 20 >"$out/bench_llama_head_m16_$pass.log" 2>&1
  echo "llama head qmv_streamed again ($pass): $(awk '$4=="qmv_streamed" {printf "M=%s %s us; ", $5, $6}' "$out/bench_llama_head_m16_$pass.log")"
done
echo "(${SECONDS}s elapsed)"
