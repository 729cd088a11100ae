#!/usr/bin/env bash
# Session 24, call 3. qmv_wide with x in wide_piece's layout (each lane's shared-memory loads at
# fixed offsets from one base per chunk; src/cuda/qmv_wide.cu) and a ring of depth 2 at two
# blocks per SM (main), against: wlb4 (four blocks per SM, 64 registers), wd2b2
# (depth 2, the swizzled layout of call 2: built from 33a8bfb's qmv_wide.cu and common.cuh) and
# wide0 (9e81ec6's exactq, the kernel before this session). Variants: TUS=qmv_wide
# scripts/build_qmv_variant.sh NAME "FLAGS" (wlb4 -DEXACTQ_WIDE_MIN_BLOCKS=4, wld3
# -DEXACTQ_WIDE_DEPTH=3, wd2b2 -DEXACTQ_WIDE_DEPTH=2), scripts/pack_variants.sh.
# Most needed first, each part skipped where it might not finish (CALL_BUDGET):
# 1. the tests that run qmv_wide (the layout's bits); 2. the qmv_wide A/B, two passes, M = 1-5 on
# four shapes; 3. the record bench of all four kernels on every preset; 4. memcheck and racecheck
# on qmv_wide's tests; 5. every CUDA test. Run with carry [".out/bin"].
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session24b
t=$bin/exactq_cuda_tests
wide_filter='CudaQmv.WideEqualsCpuMirrorOverSeveralTripsAndTiles:CudaQmv.EqualsCpuMirrorForEveryFormat:CudaQmv.EqualsCpuMirrorOnShapes:CudaQmv.NonFiniteInputsEqualCpuMirror:CudaQmv.ExtremeActivationRangesEqualCpuMirror:CudaQmv.WidthInvariantWithNegativeControl'
timeout 120 "$t" --gtest_filter="$wide_filter" >"$out/wide_tests.log" 2>&1
echo "qmv_wide tests: rc $? $(grep -E '^\[  (PASSED|FAILED)' "$out/wide_tests.log" | tr '\n' ' ') (${SECONDS}s)"
grep -E "^\[  FAILED|Failure" "$out/wide_tests.log" | head -10

echo "== qmv_wide, M = 1-5 (us at M = 1..5 per shape)"
shapes=28672x8192,128256x4096,15360x3840,3840x15360
for pass in 1 2; do
  for exe in "$bin/exactq" "$bin/exactq-wlb4" "$bin/exactq-wd2b2" "$bin/exactq-wide0"; do
    time_left 30 || { echo "skipped $exe pass $pass (${SECONDS}s)"; continue; }
    name=$(basename "$exe")
    timeout 25 "$exe" bench --backend cuda --shapes "$shapes" --m 1-5 --kernels qmv_wide --bits 4 --group 64 \
      --dtype bf16 --repeats 20 --json "$out/wide_${name}_$pass.json" >"$out/wide_${name}_$pass.log" 2>&1
    printf '%-14s %s: %s\n' "$name" "$pass" "$(awk '$4=="qmv_wide" {a[$1]=a[$1] " " $6} END {for (s in a) printf "%s%s; ", s, a[s]}' "$out/wide_${name}_$pass.log")"
  done
done
echo "(${SECONDS}s elapsed)"
if time_left 100; then
  timeout 95 "$bin/exactq" bench --backend cuda --shapes gemma12b,llama3-8b,qwen27b,big --m 1-5,8,16 \
    --kernels qmv,qmv_streamed,qmv_wide,qmv_mma --bits 4 --group 64 --dtype bf16 --repeats 20 \
    --json "$out/bench.json" --markdown "$out/bench.md" --plot "$out/bench.svg" >"$out/bench.log" 2>&1
  echo "bench: exit $? (${SECONDS}s)"
  grep -E "read ceiling" "$out/bench.log"
  awk '$4=="qmv" && $5==1 {printf "%s %s %s; ", $1, $6, $8} END {print ""}' "$out/bench.log"
  awk '$10!="-" && $10!="" && $4=="qmv_streamed" {printf "%s M=%s %s; ", $1, $5, $10} END {print ""}' "$out/bench.log"
fi
sanitize_filter='CudaQmv.WideEqualsCpuMirrorOverSeveralTripsAndTiles:CudaQmv.EqualsCpuMirrorForEveryFormat'
for tool in memcheck racecheck; do
  time_left 100 || { echo "skipped $tool: ${SECONDS}s"; continue; }
  timeout 95 compute-sanitizer --tool "$tool" --error-exitcode 9 "$t" --gtest_filter="$sanitize_filter" >"$out/sanitizer_$tool.log" 2>&1
  echo "$tool: rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$tool.log" | tail -1) (${SECONDS}s)"
done
if time_left 60; then
  # Whatever time is left; the log shows how far it got.
  timeout $((${CALL_BUDGET:-570} - SECONDS - 10)) "$t" >"$out/cuda_tests.log" 2>&1
  echo "cuda tests: rc $? $(grep -E '^\[  (PASSED|FAILED)' "$out/cuda_tests.log" | tr '\n' ' ') ok $(grep -c '^\[       OK' "$out/cuda_tests.log") (${SECONDS}s)"
  grep -E "^\[  FAILED" "$out/cuda_tests.log" | head -20
fi
echo "(${SECONDS}s elapsed)"
