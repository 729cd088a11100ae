#!/usr/bin/env bash
# Session 24, call 2 (H200). qmv_wide rebuilt with a register ring over each lane's chunks and
# warp-sized tasks (src/cuda/qmv_wide.cu; its order unchanged), against the kernel before it and
# three ring settings; and qmv's untried EXACTQ_QMV_STAGE_TWO_ROUNDS knob. Binaries:
#   exactq (main: ring depth 3, two blocks per SM), exactq_cuda_tests (main);
#   exactq-wide0: 9e81ec6's exactq (the old qmv_wide: one chunk at a time, 32-row blocks);
#   TUS=qmv_wide scripts/build_qmv_variant.sh wd2b2 "-DEXACTQ_WIDE_DEPTH=2"
#   TUS=qmv_wide scripts/build_qmv_variant.sh wd3b3 "-DEXACTQ_WIDE_MIN_BLOCKS=3"
#   TUS=qmv_wide scripts/build_qmv_variant.sh wd4b2 "-DEXACTQ_WIDE_DEPTH=4"
#   scripts/build_qmv_variant.sh s2 "-DEXACTQ_QMV_STAGE_TWO_ROUNDS=1" (its qmv_wide is the old one)
# Most needed first, each part skipped where it might not finish (CALL_BUDGET, default 570 s):
# 1. the tests that run qmv_wide against the CPU mirror (the new kernel's bits);
# 2. the qmv_wide A/B, two passes, M = 1-5 on four shapes (main's run with qmv and qmv_streamed too);
# 3. qmv at M = 1, main against s2, two passes; 4. memcheck and racecheck on qmv_wide's tests;
# 5. every CUDA test. Run with carry [".out/bin"].
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session24
t=$bin/exactq_cuda_tests
wide_filter='CudaQmv.WideEqualsCpuMirrorOverSeveralTripsAndTiles:CudaQmv.EqualsCpuMirrorForEveryFormat:CudaQmv.EqualsCpuMirrorOnShapes:CudaQmv.NonFiniteInputsEqualCpuMirror:CudaQmv.ExtremeActivationRangesEqualCpuMirror:CudaQmv.WidthInvariantWithNegativeControl'
timeout 120 "$t" --gtest_filter="$wide_filter" >"$out/wide_tests.log" 2>&1
echo "qmv_wide tests: rc $? $(grep -E '^\[  (PASSED|FAILED)' "$out/wide_tests.log" | tr '\n' ' ') (${SECONDS}s)"
grep -E "^\[  FAILED|Failure|differing" "$out/wide_tests.log" | head -10

echo "== qmv_wide, M = 1-5 (us at M = 1..5 per shape)"
shapes=28672x8192,128256x4096,15360x3840,3840x15360
for pass in 1 2; do
  for exe in "$bin/exactq" "$bin/exactq-wide0" "$bin/exactq-wd2b2" "$bin/exactq-wd3b3" "$bin/exactq-wd4b2"; do
    time_left 40 || { echo "skipped $exe pass $pass (${SECONDS}s)"; continue; }
    name=$(basename "$exe")
    kernels=qmv_wide
    [[ $name == exactq ]] && kernels=qmv,qmv_streamed,qmv_wide
    timeout 35 "$exe" bench --backend cuda --shapes "$shapes" --m 1-5 --kernels "$kernels" --bits 4 --group 64 \
      --dtype bf16 --repeats 20 --json "$out/wide_${name}_$pass.json" >"$out/wide_${name}_$pass.log" 2>&1
    printf '%-14s %s: %s\n' "$name" "$pass" "$(awk '$4=="qmv_wide" {a[$1]=a[$1] " " $6} END {for (s in a) printf "%s%s; ", s, a[s]}' "$out/wide_${name}_$pass.log")"
  done
done
awk '$4=="qmv_streamed" || $4=="qmv" {a[$1" "$4]=a[$1" "$4] " " $6} END {for (s in a) printf "%s%s\n", s, a[s]}' "$out/wide_exactq_1.log"
echo "(${SECONDS}s elapsed)"

if time_left 40; then
  echo "== qmv, M = 1"
  ab_qmv_m1 2 262144x3840,128256x4096,28672x8192,15360x3840,3840x15360 "$bin/exactq" "$bin/exactq-s2"
fi
sanitize_filter='CudaQmv.WideEqualsCpuMirrorOverSeveralTripsAndTiles:CudaQmv.EqualsCpuMirrorForEveryFormat'
for tool in memcheck racecheck; do
  time_left 130 || { echo "skipped $tool: ${SECONDS}s"; continue; }
  timeout 125 compute-sanitizer --tool "$tool" --error-exitcode 9 "$t" --gtest_filter="$sanitize_filter" >"$out/sanitizer_$tool.log" 2>&1
  echo "$tool: rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$tool.log" | tail -1) (${SECONDS}s)"
done
if time_left 110; then
  timeout 105 "$t" >"$out/cuda_tests.log" 2>&1
  echo "cuda tests: rc $? $(grep -E '^\[  (PASSED|FAILED)' "$out/cuda_tests.log" | tr '\n' ' ') (${SECONDS}s)"
  grep -E "^\[  FAILED" "$out/cuda_tests.log" | head -20
fi
echo "(${SECONDS}s elapsed)"
