#!/usr/bin/env bash
# Session 23, call 1: session 22's prepared call, shortened so that one call also runs main's CUDA
# tests for the first time since session 22 added their negative controls (device time was short:
# loans refused for most of sessions 22 and 23).
# 1. The same-call A/B of qmv at M = 1 (4-bit g64 bf16) over main and the five variants of
#    scripts/sessions/gpu_session22.sh (r8w12, r8w8, b3w12, w12, b3p; flags and ptxas figures in
#    its header), two plain passes on the three large shapes and two 33 MB projections.
# 2. Every CUDA test of main.
# 3. As time allows, the variants' bytes against the CPU mirror (qmv_wide: the negative control).
# Built as session 22's call. Run with carry [".out/bin"].
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session23
echo "== qmv, M = 1"
ab_qmv_m1 2 262144x3840,128256x4096,28672x8192,15360x3840,3840x15360 "${exes[@]}"
grep -h "ceiling" "$out"/qmv_exactq_1.log | head -3
echo "(${SECONDS}s elapsed)"
if time_left 200; then
  timeout 240 "$bin/exactq_cuda_tests" >"$out/cuda_tests.log" 2>&1
  echo "cuda tests: rc $? $(grep -E '^\[  (PASSED|FAILED)' "$out/cuda_tests.log" | tr '\n' ' ') (${SECONDS}s)"
  grep -E "^\[  FAILED" "$out/cuda_tests.log" | head -20
else
  echo "skipped the CUDA tests: ${SECONDS}s elapsed"
fi
echo "== parity of the variants against the CPU mirror (qmv_wide: the negative control)"
variant_parity "--n 11651 --k 4416 --dtype bf16 --group 64 --m-max 2" "--n 70001 --k 1024 --dtype bf16 --group 64 --m-max 2" \
  "--n 4099 --k 8192 --dtype f32 --group 128 --m-max 2" "--n 1003 --k 15360 --dtype f16 --group 32 --m-max 2" -- "${exes[@]:1}"
echo "(${SECONDS}s elapsed)"
