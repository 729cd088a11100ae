#!/usr/bin/env bash
# A variant's CUDA tests in full, then compute-sanitizer memcheck and racecheck on qmv's tests,
# in a device call of its own (a call stops at 600 s): what a variant must pass before its knob
# becomes the default. The tests binary comes from TESTS=1 scripts/build_qmv_variant.sh NAME ...
# then scripts/pack_variants.sh. Usage: scripts/gpu_variant_checks.sh NAME
set -uo pipefail
variant=${1:?usage: scripts/gpu_variant_checks.sh NAME}
source "$(dirname "$0")/gpu_logs.sh" "checks-$variant"
t=$bin/exactq_cuda_tests-$variant
[[ -x $t ]] || { echo "$t is missing: build it first (TESTS=1 scripts/build_qmv_variant.sh $variant ...)"; exit 2; }
name=$(basename "$t")
f='CudaQmv.EqualsCpuMirrorForEveryFormat:CudaQmv.EqualsCpuMirrorOverSeveralTrips:CudaQmv.OverlappedChainedLaunchesEqualCpuMirror:CudaQmv.ExtremeActivationRangesEqualCpuMirror'
timeout 150 "$t" >"$out/$name.log" 2>&1; echo "$name: rc $? $(grep -E 'PASSED|FAILED' "$out/$name.log" | tail -1)"
timeout 220 compute-sanitizer --tool memcheck --error-exitcode 9 "$t" --gtest_filter="$f" >"$out/$name-memcheck.log" 2>&1
echo "$name memcheck: rc $? $(grep -E 'ERROR SUMMARY' "$out/$name-memcheck.log" | tail -1)"
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 "$t" --gtest_filter="CudaQmv.EqualsCpuMirrorForEveryFormat" \
  >"$out/$name-racecheck.log" 2>&1
echo "$name racecheck: rc $? $(grep -E 'RACECHECK SUMMARY' "$out/$name-racecheck.log" | tail -1)"
