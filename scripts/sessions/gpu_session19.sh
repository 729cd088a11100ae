#!/usr/bin/env bash
# Session 19, call 1 (prepared while no device was lent; session 18's call 3 folded in, without
# its s2 variants). The variants, each against main in the same call:
#   w16    qmv's blocks of 16 warps, one per SM: x staged once per SM, not twice (x's staging costs
#          2 of 14 us on 3840x15360, session 18 call 2);
#   fs     x staged by stage_integers_fast (a staging-only kernel: 384 PTX instructions, not 660),
#          in qmv and qmv_streamed;
#   bal    qmv's rounds shared evenly by each block's warps where the trips leave warps idle
#          (Qwen's down projection: 17 rounds for the busiest warp, 11 shared; decision 0003);
#   w16fs, fsbal, w16fsbal: the combinations.
# Bytes first: fs's and bal's CUDA tests in full, parity against the CPU mirror; then qmv at M = 1
# over two passes, plain and overlapped, on ten shapes; then qmv_streamed's sweep (its staging
# grows with V), main and fs. Next, in a call of its own: scripts/gpu_variant_checks.sh NAME for
# the variant that would land (w16fsbal's tests are built).
# Build here first (GENCODE=sm_90a scripts/build_for_gpu.sh: build-dev and the main binaries; then
# rm .out/bin/variants.tar.xz, since variants link build-dev's objects):
#   scripts/build_qmv_variant.sh w16 "-DEXACTQ_QMV_WARPS=16"
#   TESTS=1 TUS="qmv qmv_streamed" scripts/build_qmv_variant.sh fs "-DEXACTQ_QMV_FAST_STAGING=1"
#   TESTS=1 scripts/build_qmv_variant.sh bal "-DEXACTQ_QMV_BALANCED=1"
#   TUS="qmv qmv_streamed" scripts/build_qmv_variant.sh w16fs "-DEXACTQ_QMV_WARPS=16 -DEXACTQ_QMV_FAST_STAGING=1"
#   TUS="qmv qmv_streamed" scripts/build_qmv_variant.sh fsbal "-DEXACTQ_QMV_FAST_STAGING=1 -DEXACTQ_QMV_BALANCED=1"
#   TESTS=1 TUS="qmv qmv_streamed" scripts/build_qmv_variant.sh w16fsbal \
#     "-DEXACTQ_QMV_WARPS=16 -DEXACTQ_QMV_FAST_STAGING=1 -DEXACTQ_QMV_BALANCED=1"
#   scripts/pack_variants.sh
# Then run with carry [".out/bin"] (under 64 MiB).
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session19
echo "== fs's and bal's CUDA tests (CudaQmv.*: their kernels)"
for v in fs bal; do
  timeout 100 "$bin/exactq_cuda_tests-$v" --gtest_filter='CudaQmv.*' >"$out/cuda_tests_$v.log" 2>&1
  echo "exactq_cuda_tests-$v: rc $? $(grep -E '^\[  (PASSED|FAILED)' "$out/cuda_tests_$v.log" | tail -3 | tr '\n' ' ')"
done
echo "== parity against the CPU mirror"
for exe in "$bin/exactq-w16" "$bin/exactq-fs" "$bin/exactq-bal" "$bin/exactq-w16fsbal"; do
  name=$(basename "$exe")
  for args in "--n 9001 --k 3840 --dtype bf16 --bits 4" "--n 20001 --k 4096 --dtype f16 --bits 4" \
    "--n 3000 --k 15360 --dtype bf16 --bits 4" "--n 2001 --k 17408 --dtype f32 --bits 4" \
    "--n 20001 --k 4416 --dtype bf16 --bits 5" "--n 20001 --k 2048 --dtype f16 --bits 8" \
    "--n 5001 --k 6144 --dtype f32 --bits 2" "--n 1803 --k 17408 --dtype bf16 --bits 4"; do
    "$exe" parity --backend cuda --against cpu --kernels qmv,qmv_streamed,qmv_wide --group 64 $args --m-max 5 --seeds 1 \
      >>"$out/parity_$name.log" 2>&1
    echo "parity $name $args: exit $?"
  done
done
qmv_m1_section "${exes[@]}"
echo "== qmv_streamed and qmv_wide against narrow qmv, M = 1..8 and 16 (main, then fs)"
for exe in "$bin/exactq" "$bin/exactq-fs"; do
  name=$(basename "$exe")
  time_left 85 || { echo "skipped $name: ${SECONDS}s elapsed"; continue; }
  timeout 80 "$exe" bench --backend cuda --shapes 3840x15360,15360x3840,28672x8192 --m 1-8,16 \
    --kernels qmv,qmv_streamed,qmv_wide --bits 4 --group 64 --dtype bf16 --repeats 20 \
    --json "$out/streamed_$name.json" --markdown "$out/streamed_$name.md" >"$out/streamed_$name.log" 2>&1
  echo "streamed $name: exit $?"
  awk '$4=="qmv_streamed" {printf "%s M=%s %s us; ", $1, $5, $6}' "$out/streamed_$name.log"; echo
done
