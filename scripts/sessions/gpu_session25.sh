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
# Ran in session 25 call 1 (on an H100). The knob is now EXACTQ_WIDE_PIECE_MAX_VECTORS (the
# largest V given the piece-major layout; 5 is this script's wp, 0 its main).
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session25
record_gtest wp_wide_tests 120 "$bin/exactq_cuda_tests-wp" "$wide_test_filter"
ab_wide 28672x8192,128256x4096,15360x3840,3840x15360 "$bin/exactq" "$bin/exactq-wp" "$bin/exactq-wpb4"
record_bench
sanitize 95 "$bin/exactq_cuda_tests-wp" 'CudaQmv.WideEqualsCpuMirrorOverSeveralTripsAndTiles:CudaQmv.EqualsCpuMirrorForEveryFormat' wp_
record_parity "4 64 bf16 4096 3840" "8 128 f16 1031 4096" "3 64 bf16 70001 1024" "5 64 f32 2048 3840"
# Main's CUDA tests in whatever time is left; the log shows how far they got.
time_left 60 && record_gtest cuda_tests $((${CALL_BUDGET:-570} - SECONDS - 10)) "$bin/exactq_cuda_tests"
echo "(${SECONDS}s elapsed)"
