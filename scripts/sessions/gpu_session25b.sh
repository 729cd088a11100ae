#!/usr/bin/env bash
# Session 25, call 2 (wanted on an H200; call 1 got an H100). Build here first:
#   GENCODE=sm_90a scripts/build_for_gpu.sh
#   TUS=qmv_wide scripts/build_qmv_variant.sh sw "-DEXACTQ_WIDE_PIECE_MAX_VECTORS=0"
#   TUS=qmv_wide scripts/build_qmv_variant.sh pm "-DEXACTQ_WIDE_PIECE_MAX_VECTORS=5"
#   ALL=1 scripts/pack_variants.sh
# Run with carry [".out/bin"]. In order, each part skipped where it might not finish (CALL_BUDGET):
# 1. qmv_wide's shared-memory layouts on this card: main (piece-major at V <= 3, swizzled at 4-5)
#    against sw (swizzled at every V, main before session 25) and pm (piece-major at every V);
# 2. held runs (3000 graph replays each, about a second or more) of qmv at M = 1 on 28672x8192 and
#    both heads, and of qmv_streamed at M = 16 on Llama's head, under a 50 ms trace of the SM clock,
#    power and clock-event reasons (clocks.csv, phases in marks.txt): is the SM clock held down
#    while qmv runs, or later in a long sweep (qmv_streamed at M = 16 on Llama's head: 780 us
#    inside the sweep against 625 alone, session 24)?
# 3. the record bench of all four kernels on every preset (the H200 record's qmv_wide is still the
#    kernel before session 24's ring); 4. main's qmv_wide tests and parity of the four kernels;
# 5. main's CUDA tests in the time left.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session25b
start_clock_sampler
mark start
ab_wide 28672x8192,128256x4096,15360x3840,3840x15360 "$bin/exactq" "$bin/exactq-sw" "$bin/exactq-pm"

# A held bench point: NAME, then bench options; logs $out/held_NAME.*, marked for the trace.
held() {
  local name=$1
  shift
  time_left 70 || { echo "skipped held $name (${SECONDS}s)"; return; }
  mark "$name start"
  timeout 60 "$bin/exactq" bench --backend cuda --bits 4 --group 64 --dtype bf16 "$@" \
    --json "$out/held_$name.json" >"$out/held_$name.log" 2>&1
  mark "$name end"
  echo "held $name: $(grep -E 'streaming read of the same' "$out/held_$name.log" | sed -E 's/.*: //') | $(awk '$5 ~ /^[0-9]+$/ {printf "%s M=%s %s us %s; ", $4, $5, $6, $8}' "$out/held_$name.log") (${SECONDS}s)"
}
held big --shapes 28672x8192 --m 1 --kernels qmv --repeats 3000
held llama_head --shapes 128256x4096 --m 1 --kernels qmv --repeats 3000
held gemma_head --shapes 262144x3840 --m 1 --kernels qmv --repeats 1500
held llama_head_streamed16 --shapes 128256x4096 --m 16 --kernels qmv_streamed --repeats 300
mark record
record_bench
mark "record end"
record_gtest wide_tests 60 "$bin/exactq_cuda_tests" "$wide_test_filter"
record_parity "4 64 bf16 4096 3840" "8 128 f16 1031 4096" "3 64 bf16 70001 1024" "5 64 f32 2048 3840"
time_left 60 && record_gtest cuda_tests $((${CALL_BUDGET:-570} - SECONDS - 10)) "$bin/exactq_cuda_tests"
mark end
echo "(${SECONDS}s elapsed)"
