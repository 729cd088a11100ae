#!/usr/bin/env bash
# Session 20, call 4: the record of the new defaults (qmv_streamed: passes of Vmax then the rest,
# Vmax 4 on many rows, V = 5 at one block per SM, x staged by stage_integers_fast; qmv as before,
# the balanced path and the fast-staging knob removed). What scripts/gpu_final.sh runs, each part
# skipped where it might not finish before the 600 s kill (which loses the archive): every CUDA
# test, parity of all four kernels, memcheck and racecheck, then the bench at M = 1-5, 8, 16.
# Built with GENCODE=sm_90a scripts/build_for_gpu.sh; carry [".out/bin"].
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session20d
t=$bin/exactq_cuda_tests
timeout 200 "$t" >"$out/cuda_tests.log" 2>&1
echo "cuda tests: rc $? $(grep -E '^\[  (PASSED|FAILED)' "$out/cuda_tests.log" | tr '\n' ' ') (${SECONDS}s)"
grep -E "^\[  FAILED" "$out/cuda_tests.log" | head -20
for spec in "4 64 bf16 4096 3840" "8 128 f16 1031 4096" "4 32 f16 517 8192" "3 64 bf16 70001 1024" "5 64 f32 2048 3840"; do
  time_left 60 || { echo "skipped parity $spec"; continue; }
  read -r b g d n k <<<"$spec"
  timeout 60 "$bin/exactq" parity --backend cuda --against cpu --kernels qmv,qmv_streamed,qmv_wide,qmv_mma --n "$n" --k "$k" \
    --bits "$b" --group "$g" --dtype "$d" --m-max 20 --seeds 1 >>"$out/parity.log" 2>&1
  echo "parity $spec: exit $? (${SECONDS}s)"
done
filter='CudaQmv.EqualsCpuMirrorForEveryFormat:CudaQmv.WidthInvariantWithNegativeControl:CudaQmv.RejectsBadArguments:CudaQmvMma.RejectsWhatItDoesNotServe'
for tool in memcheck racecheck; do
  time_left 150 || { echo "skipped $tool: ${SECONDS}s"; continue; }
  f=$filter
  [[ $tool == memcheck ]] && f+=':CudaQmv.OverlappedChainedLaunchesEqualCpuMirror'
  timeout 140 compute-sanitizer --tool "$tool" --error-exitcode 9 "$t" --gtest_filter="$f" >"$out/sanitizer_$tool.log" 2>&1
  echo "$tool: rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$tool.log" | tail -1) (${SECONDS}s)"
done
if time_left 100; then
  timeout 95 "$bin/exactq" bench --backend cuda --shapes gemma12b,llama3-8b,qwen27b,big --m 1-5,8,16 \
    --kernels qmv,qmv_streamed,qmv_wide,qmv_mma --bits 4 --group 64 --dtype bf16 --repeats 20 \
    --json "$out/bench.json" --markdown "$out/bench.md" --plot "$out/bench.svg" >"$out/bench.log" 2>&1
  echo "bench: exit $? (${SECONDS}s)"
  grep -E "ceiling|V=" "$out/bench.log" | head -20
  awk '($4=="qmv_streamed" || $4=="qmv") && ($1 ~ /head|big/) {printf "%s %s M=%s %s; ", $1, $4, $5, $6}' "$out/bench.log"; echo
fi
