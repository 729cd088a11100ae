#!/usr/bin/env bash
# Session 25's H200 call, most needed first (gpu_session25c.sh's parts, reordered for a short
# budget). Build as the header of gpu_session25c.sh says; run with carry [".out/bin"] on an H200.
# 1. held runs (`held`, scripts/gpu_logs.sh) under the 50 ms trace of SM clock, power and
#    clock-event reasons (clocks.csv, phases in marks.txt): qmv at M = 1 on Llama's head, 28672x8192 and Gemma's head, then the energy
#    probes e1 (no dot) and e2 (x's digits not read from shared memory) on Llama's head (both
#    compute wrong bytes on purpose: timed and traced only), and qmv_streamed at M = 16 on Llama's
#    head;
# 2. the record bench of all four kernels on every preset (the H200 record's qmv_wide is still
#    the kernel before session 24's ring);
# 3. main's qmv_wide tests; 4. the qmv_wide layouts A/B (main, sw, pm); 5. parity of the four
#    kernels; 6. main's CUDA tests in the time left.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session25d
start_clock_sampler
mark start
held llama_head "$bin/exactq" --shapes 128256x4096 --m 1 --kernels qmv --repeats 5000
held big "$bin/exactq" --shapes 28672x8192 --m 1 --kernels qmv --repeats 6000
held gemma_head "$bin/exactq" --shapes 262144x3840 --m 1 --kernels qmv --repeats 2500
held llama_head_e1 "$bin/exactq-e1" --shapes 128256x4096 --m 1 --kernels qmv --repeats 5000
held llama_head_e2 "$bin/exactq-e2" --shapes 128256x4096 --m 1 --kernels qmv --repeats 5000
held llama_head_streamed16 "$bin/exactq" --shapes 128256x4096 --m 16 --kernels qmv_streamed --repeats 300
mark record
record_bench
mark "record end"
time_left 60 && record_gtest wide_tests 50 "$bin/exactq_cuda_tests" "$wide_test_filter"
ab_wide 28672x8192,128256x4096,15360x3840,3840x15360 "$bin/exactq" "$bin/exactq-sw" "$bin/exactq-pm"
record_parity "4 64 bf16 4096 3840" "8 128 f16 1031 4096" "3 64 bf16 70001 1024" "5 64 f32 2048 3840"
time_left 60 && record_gtest cuda_tests $((${CALL_BUDGET:-570} - SECONDS - 10)) "$bin/exactq_cuda_tests"
mark end
echo "(${SECONDS}s elapsed)"
