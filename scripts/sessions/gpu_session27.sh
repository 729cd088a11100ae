#!/usr/bin/env bash
# Session 27's GPU call: 4-bit qmv with its weights in a per-warp cp.async ring (EXACTQ_QMV_ASYNC_STAGES,
# src/cuda/qmv_family.cuh) against main's register double buffer. Build: GENCODE=sm_90a
# scripts/build_for_gpu.sh; for s in 3 4 5: scripts/build_qmv_variant.sh a$s "-DEXACTQ_QMV_ASYNC_STAGES=$s"
# (TESTS=1 for a4); ALL=1 scripts/pack_variants.sh; run with carry [".out/bin"].
# 1. bytes first: each variant's qmv against the CPU mirror (parity, qmv_wide the negative control)
#    on shapes with several trips, a split last trip, K = 3840 and K in two tiles; a4's CUDA qmv tests;
# 2. qmv at M = 1, main a3 a4 a5, two passes on the large shapes and two projections, then overlapped;
# 3. a4 with and without its L2 prefetch on the heads; memcheck and racecheck on a4's tests, as time allows.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session27
start_clock_sampler
mark start
variants=("$bin/exactq-a3" "$bin/exactq-a4" "$bin/exactq-a5")
variant_parity "--n 28673 --k 8192 --dtype bf16 --group 64 --m-max 2" "--n 9001 --k 3840 --dtype f16 --group 32 --m-max 2" \
  "--n 4099 --k 20480 --dtype bf16 --group 128 --m-max 1" "--n 40001 --k 4096 --dtype f32 --group 64 --m-max 1" -- "${variants[@]}"
grep -hE "FAIL|PASS|differ" "$out"/parity_exactq-a*.log | sort | uniq -c | head -20
qmv_tests='CudaQmv.EqualsCpuMirrorForEveryFormat:CudaQmv.EqualsCpuMirrorOnShapes:CudaQmv.EqualsCpuMirrorOverSeveralTrips:CudaQmv.NonFiniteInputsEqualCpuMirror:CudaQmv.ExtremeActivationRangesEqualCpuMirror:CudaQmv.OverlappedChainedLaunchesEqualCpuMirror:CudaQmv.WidthInvariantWithNegativeControl'
time_left 150 && record_gtest tests_a4 120 "$bin/exactq_cuda_tests-a4" "$qmv_tests"
mark "ab start"
echo "== qmv, M = 1"
ab_qmv_m1 2 128256x4096,28672x8192,262144x3840,14336x4096,4096x14336 "$bin/exactq" "${variants[@]}"
grep -h "ceiling" "$out"/qmv_exactq_1.log | head -2
echo "(${SECONDS}s elapsed)"
time_left 80 && ovl_qmv_m1 128256x4096,28672x8192,262144x3840 "$bin/exactq" "${variants[@]}"
if time_left 60; then
  timeout 50 "$bin/exactq-a4" bench --backend cuda --shapes 128256x4096,262144x3840 --bits 4 --group 64 --dtype bf16 \
    --repeats 20 --m 1 --kernels qmv --sweep-qmv-tuning=-1:-1,0:-1,1:-1,2:-1 --json "$out/prefetch_a4.json" >"$out/prefetch_a4.log" 2>&1
  echo "a4 prefetch sweep: exit $?"; grep -E "^[0-9]+x[0-9]+ +[0-9]+ +[0-9]+ qmv" "$out/prefetch_a4.log"
fi
time_left 100 && sanitize 90 "$bin/exactq_cuda_tests-a4" "CudaQmv.EqualsCpuMirrorOverSeveralTrips:CudaQmv.OverlappedChainedLaunchesEqualCpuMirror" a4_
mark end
echo "(${SECONDS}s elapsed)"
