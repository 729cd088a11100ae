#!/usr/bin/env bash
# Session 14, sixth call: carrying the next trip's first chunk in a task's last round (run-time
# knob), against the record run's build (.out/bin/exactq-base): the CUDA suite, then the A/B.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session14f
"$bin/exactq_cuda_tests" --gtest_filter='CudaQmv.*' >"$out/cuda_tests.log" 2>&1
echo "cuda tests (CudaQmv.*): exit $? $(grep -E '^\[  (PASSED|FAILED)' "$out/cuda_tests.log" | tr '\n' ' ')"
grep -E "^\[  FAILED" "$out/cuda_tests.log" | head
shapes=262144x3840,128256x4096,28672x8192,17408x5120,15360x3840
for rep in 1 2; do
  "$bin/exactq" bench --backend cuda --shapes $shapes --m 1 --kernels qmv --bits 4 --group 64 --dtype bf16 --repeats 40 \
    --sweep-qmv-tuning -1:-1:0,-1:-1:1 --json "$out/new_$rep.json" >"$out/new_$rep.log" 2>&1
  "$bin/exactq-base" bench --backend cuda --shapes $shapes --m 1 --kernels qmv --bits 4 --group 64 --dtype bf16 \
    --repeats 40 --json "$out/base_$rep.json" >"$out/base_$rep.log" 2>&1
  echo "== rep $rep $(grep ceiling "$out/new_$rep.log")"
  awk '$4=="qmv" && $5==1 {printf "new  %-12s %7s %6s %s\n", $1, $6, $8, substr($0, index($0, "prefetch"))}' "$out/new_$rep.log"
  awk '$4=="qmv" && $5==1 {printf "base %-12s %7s %6s\n", $1, $6, $8}' "$out/base_$rep.log"
done
"$bin/exactq" bench --backend cuda --shapes 28672x8192,262144x3840 --m 1 --kernels qmv --bits 2 --group 64 --dtype bf16 \
  --repeats 40 --sweep-qmv-tuning -1:-1:0,-1:-1:1 --json "$out/new_2bit.json" >"$out/new_2bit.log" 2>&1
awk '$4=="qmv" && $5==1 {printf "new 2-bit %-12s %7s %6s %s\n", $1, $6, $8, substr($0, index($0, "prefetch"))}' "$out/new_2bit.log"
