#!/usr/bin/env bash
# Everything one GPU call needs: tests, sanitizers, parity against the CPU mirror, benchmark.
# Binaries are built on the CPU machine (scripts/build_for_gpu.sh) and carried in .out/bin;
# logs and JSON go to $OUT. Usage: scripts/gpu_session.sh [quick|full|bench|sanitize]
set -uo pipefail
mode=${1:-full}
bin=.out/bin
"$(dirname "$0")/gpu_unpack.sh"
out=${OUT:-/tmp/exactq-out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
status=0
step() { echo; echo "=== $* ==="; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee "$out/gpu.txt"

if [[ $mode == quick || $mode == full ]]; then
  step "CUDA tests"
  "$bin/exactq_cuda_tests" 2>&1 | tee "$out/cuda_tests.log" | tail -25 || status=1
  step "parity --backend cuda --against cpu"
  : >"$out/parity.log"
  for spec in "4 64 bf16 4096 3840" "4 128 f16 2048 15360" "8 64 bf16 3840 4096" "3 32 f32 1031 3840" \
              "2 64 f16 517 5120" "5 128 bf16 2048 3840" "6 32 f32 999 2048" "8 64 f32 4097 320"; do
    read -r b g d n k <<<"$spec"
    "$bin/exactq" parity --backend cuda --against cpu --n "$n" --k "$k" --bits "$b" --group "$g" --dtype "$d" \
      --m-max 16 --seeds 1,2 --json "$out/parity_${b}b_g${g}_${d}.json" >>"$out/parity.log" 2>&1
    rc=$?
    tail -1 "$out/parity.log" | cut -c1-120
    [[ $rc == 0 || $rc == 3 ]] || status=1
  done
fi

if [[ $mode == sanitize || $mode == full ]]; then
  step "compute-sanitizer memcheck / racecheck"
  for tool in memcheck racecheck; do
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/exactq_cuda_tests" \
      --gtest_filter='CudaQmv.EqualsCpuMirrorForEveryFormat:CudaQmv.RejectsBadArguments' >"$out/sanitizer_$tool.log" 2>&1
    rc=$?
    echo "$tool: exit $rc; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$tool.log" | tail -1)"
    [[ $rc == 0 ]] || status=1
  done
fi

if [[ $mode == bench || $mode == full ]]; then
  step "bench"
  "$bin/exactq" bench --backend cuda --shapes "${BENCH_SHAPES:-gemma12b,llama3-8b,qwen27b,big}" --m "${BENCH_M:-1-16}" \
    --kernels qmv,qmv_streamed,qmv_wide --bits 4 --group 64 --dtype bf16 --repeats "${BENCH_REPEATS:-20}" \
    --json "$out/bench.json" --markdown "$out/bench.md" --plot "$out/bench.svg" >"$out/bench.log" 2>&1 || status=1
  grep -E "ceiling|V=" "$out/bench.log"
  awk '$4=="qmv" && $5==1 || $4=="qmv_streamed" && ($5==2 || $5==4 || $5==8 || $5==16) || $4=="qmv_wide" && ($5==4 || $5==16)' "$out/bench.log"
fi
if [[ $mode == full ]]; then
  step "summary"
  grep -E "PASSED|FAILED" "$out/cuda_tests.log" | tail -3
  grep -E "^(PASS|FAIL|INCONCLUSIVE)" "$out/parity.log" | cut -c1-160
  grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$out"/sanitizer_*.log
fi
exit $status
