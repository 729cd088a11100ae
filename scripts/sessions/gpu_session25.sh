#!/usr/bin/env bash
# The next H200 call (written in session 24, whose last two calls were refused). qmv_wide's
# wide_piece layout (EXACTQ_WIDE_PIECE_LAYOUT=1: each lane's shared-memory loads at fixed offsets
# per chunk; built, never run) against main's swizzled layout (call 2's wd2b2, run on an H100),
# then the record of every kernel on the H200 with main's qmv_wide. Build here first (a fresh
# checkout has no .out):
#   GENCODE=sm_90a scripts/build_for_gpu.sh
#   TESTS=1 TUS=qmv_wide scripts/build_qmv_variant.sh wp "-DEXACTQ_WIDE_PIECE_LAYOUT=1"
#   TUS=qmv_wide scripts/build_qmv_variant.sh wpb4 "-DEXACTQ_WIDE_PIECE_LAYOUT=1 -DEXACTQ_WIDE_MIN_BLOCKS=4"
#   ALL=1 scripts/pack_variants.sh     (all five binaries in one archive: about 18 MB)
# Run with carry [".out/bin"]. Most needed first, each part skipped where it might not finish
# (CALL_BUDGET, default 570 s): 1. wp's bits (the tests that run qmv_wide, with wp's test binary);
# 2. the qmv_wide A/B, two passes, M = 1-5 on four shapes; 3. the record bench of all four kernels
# on every preset with main; 4. memcheck and racecheck on wp's qmv_wide tests; 5. parity of main's
# four kernels against the CPU mirror; 6. main's CUDA tests.
# If wp wins and its tests pass: make EXACTQ_WIDE_PIECE_LAYOUT=1 the default (and drop the
# swizzled path), rebuild, and record again.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session25
wide_filter='CudaQmv.WideEqualsCpuMirrorOverSeveralTripsAndTiles:CudaQmv.EqualsCpuMirrorForEveryFormat:CudaQmv.EqualsCpuMirrorOnShapes:CudaQmv.NonFiniteInputsEqualCpuMirror:CudaQmv.ExtremeActivationRangesEqualCpuMirror:CudaQmv.WidthInvariantWithNegativeControl'
timeout 120 "$bin/exactq_cuda_tests-wp" --gtest_filter="$wide_filter" >"$out/wp_wide_tests.log" 2>&1
echo "wp's qmv_wide tests: rc $? $(grep -E '^\[  (PASSED|FAILED)' "$out/wp_wide_tests.log" | tr '\n' ' ') (${SECONDS}s)"
grep -E "^\[  FAILED|Failure" "$out/wp_wide_tests.log" | head -10

echo "== qmv_wide, M = 1-5 (us at M = 1..5 per shape)"
shapes=28672x8192,128256x4096,15360x3840,3840x15360
for pass in 1 2; do
  for exe in "$bin/exactq" "$bin/exactq-wp" "$bin/exactq-wpb4"; do
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
  awk '$4=="qmv_streamed" && $10!="-" && $10!="" {printf "%s M=%s %s; ", $1, $5, $10} END {print ""}' "$out/bench.log"
fi
sanitize_filter='CudaQmv.WideEqualsCpuMirrorOverSeveralTripsAndTiles:CudaQmv.EqualsCpuMirrorForEveryFormat'
for tool in memcheck racecheck; do
  time_left 100 || { echo "skipped $tool: ${SECONDS}s"; continue; }
  timeout 95 compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/exactq_cuda_tests-wp" --gtest_filter="$sanitize_filter" \
    >"$out/sanitizer_wp_$tool.log" 2>&1
  echo "wp $tool: rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_wp_$tool.log" | tail -1) (${SECONDS}s)"
done
record_parity "4 64 bf16 4096 3840" "8 128 f16 1031 4096" "3 64 bf16 70001 1024" "5 64 f32 2048 3840"
if time_left 60; then
  # Whatever time is left; the log shows how far it got.
  timeout $((${CALL_BUDGET:-570} - SECONDS - 10)) "$bin/exactq_cuda_tests" >"$out/cuda_tests.log" 2>&1
  echo "cuda tests: rc $? $(grep -E '^\[  (PASSED|FAILED)' "$out/cuda_tests.log" | tr '\n' ' ') ok $(grep -c '^\[       OK' "$out/cuda_tests.log") (${SECONDS}s)"
  grep -E "^\[  FAILED" "$out/cuda_tests.log" | head -20
fi
echo "(${SECONDS}s elapsed)"
