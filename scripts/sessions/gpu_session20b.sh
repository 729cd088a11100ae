#!/usr/bin/env bash
# Session 20, call 2: the bytes of session 19's variants (fs's and bal's CUDA tests, parity against
# the CPU mirror for w16, fs, bal and w16fsbal), then qmv_streamed's sweep (main and fs). Binaries
# as gpu_session19.sh (carry [".out/bin"]).
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session20b
echo "== fs's and bal's CUDA tests (CudaQmv.*: their kernels)"
for v in fs bal; do
  timeout 100 "$bin/exactq_cuda_tests-$v" --gtest_filter='CudaQmv.*' >"$out/cuda_tests_$v.log" 2>&1
  echo "exactq_cuda_tests-$v: rc $? $(grep -E '^\[  (PASSED|FAILED)' "$out/cuda_tests_$v.log" | tail -3 | tr '\n' ' ')"
done
echo "(${SECONDS}s elapsed)"
echo "== parity against the CPU mirror"
for exe in "$bin/exactq-w16fsbal" "$bin/exactq-fs" "$bin/exactq-bal" "$bin/exactq-w16"; do
  name=$(basename "$exe")
  for args in "--n 9001 --k 3840 --dtype bf16 --bits 4" "--n 20001 --k 4096 --dtype f16 --bits 4" \
    "--n 3000 --k 15360 --dtype bf16 --bits 4" "--n 2001 --k 17408 --dtype f32 --bits 4" \
    "--n 20001 --k 4416 --dtype bf16 --bits 5" "--n 20001 --k 2048 --dtype f16 --bits 8" \
    "--n 5001 --k 6144 --dtype f32 --bits 2" "--n 1803 --k 17408 --dtype bf16 --bits 4"; do
    time_left 150 || { echo "skipped parity $name $args: ${SECONDS}s elapsed"; continue; }
    timeout 60 "$exe" parity --backend cuda --against cpu --kernels qmv,qmv_streamed,qmv_wide --group 64 $args --m-max 5 --seeds 1 \
      >>"$out/parity_$name.log" 2>&1
    echo "parity $name $args: exit $?"
  done
done
echo "(${SECONDS}s elapsed)"
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
