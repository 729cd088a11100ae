#!/usr/bin/env bash
# Session 18, prepared for after scripts/sessions/gpu_session18c.sh (a call of its own: a call stops at 600 s):
# the 16-warp variant's CUDA tests (TESTS=1 scripts/build_qmv_variant.sh w16 "-DEXACTQ_QMV_WARPS=16"
# links them against it), then compute-sanitizer memcheck and racecheck on qmv's tests.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session18d
echo "== the 16-warp variant's CUDA tests, memcheck and racecheck (the kernels that would land)"
f='CudaQmv.EqualsCpuMirrorForEveryFormat:CudaQmv.EqualsCpuMirrorOverSeveralTrips:CudaQmv.OverlappedChainedLaunchesEqualCpuMirror'
t=$bin/exactq_cuda_tests-w16
[[ -x $t ]] || { echo "$t is missing: build it first (see above)"; exit 2; }
name=$(basename "$t")
timeout 120 "$t" >"$out/$name.log" 2>&1; echo "$name: rc $? $(grep -E 'PASSED|FAILED' "$out/$name.log" | tail -1)"
timeout 170 compute-sanitizer --tool memcheck --error-exitcode 9 "$t" --gtest_filter="$f" >"$out/$name-memcheck.log" 2>&1
echo "$name memcheck: rc $? $(grep -E 'ERROR SUMMARY' "$out/$name-memcheck.log" | tail -1)"
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 "$t" --gtest_filter="CudaQmv.EqualsCpuMirrorForEveryFormat" \
  >"$out/$name-racecheck.log" 2>&1
echo "$name racecheck: rc $? $(grep -E 'RACECHECK SUMMARY' "$out/$name-racecheck.log" | tail -1)"
