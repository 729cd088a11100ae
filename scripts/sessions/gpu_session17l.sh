#!/usr/bin/env bash
# Session 17, the final build's sanitizers (call 13; the record run, call 12, ran
# SKIP_SANITIZERS=1 BENCH_M=1,4,16 scripts/gpu_final.sh): memcheck on qmv's CPU-mirror tests at every
# width, group and dtype, over several trips with the last split and not, and chained overlapped
# launches; racecheck on every format.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
scripts/gpu_unpack.sh >/dev/null
b=.out/bin
f='CudaQmv.EqualsCpuMirrorForEveryFormat:CudaQmv.EqualsCpuMirrorOverSeveralTrips:CudaQmv.RejectsBadArguments'
timeout 170 compute-sanitizer --tool memcheck --error-exitcode 9 $b/exactq_cuda_tests \
  --gtest_filter="$f:CudaQmv.OverlappedChainedLaunchesEqualCpuMirror" 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED" | tail -3
echo "memcheck rc ${PIPESTATUS[0]}"
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $b/exactq_cuda_tests \
  --gtest_filter="CudaQmv.EqualsCpuMirrorForEveryFormat" 2>&1 | grep -E "RACECHECK SUMMARY|PASSED|FAILED" | tail -3
echo "racecheck rc ${PIPESTATUS[0]}"
