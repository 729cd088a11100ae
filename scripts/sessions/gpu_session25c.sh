#!/usr/bin/env bash
# Session 25, the H200 call (gpu_session25b.sh plus the energy probes). Build here first:
#   GENCODE=sm_90a scripts/build_for_gpu.sh
#   TUS=qmv_wide scripts/build_qmv_variant.sh sw "-DEXACTQ_WIDE_PIECE_MAX_VECTORS=0"
#   TUS=qmv_wide scripts/build_qmv_variant.sh pm "-DEXACTQ_WIDE_PIECE_MAX_VECTORS=5"
#   scripts/build_qmv_variant.sh e1 "-DEXACTQ_QMV_ENERGY_PROBE=1"
#   scripts/build_qmv_variant.sh e2 "-DEXACTQ_QMV_ENERGY_PROBE=2"
#   ALL=1 scripts/pack_variants.sh
# Run with carry [".out/bin"], REQUIRE_GPU=H200 (stops at once on another card). PROBES_ONLY=1
# runs only part 2 (for an H100: the power of each probe, where it stays under the cap).
# 1. qmv_wide's layouts: main (piece-major at V <= 3) against sw (swizzled at every V) and pm
#    (piece-major at every V);
# 2. held runs (a few seconds each) under the 50 ms trace of SM clock, power and clock-event
#    reasons (clocks.csv; phases in marks.txt): qmv at M = 1 on 28672x8192 and both heads,
#    qmv_streamed at M = 16 on Llama's head, then the energy probes on both heads: e1 (no dot,
#    wrong bytes) and e2 (x's digits not read from shared memory, wrong bytes). Is the SM clock
#    held down under qmv and not under the read, and which part of the loop draws the power?
# 3. the record bench of all four kernels on every preset; 4. main's qmv_wide tests and parity of
#    the four kernels; 5. main's CUDA tests in the time left.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session25c
start_clock_sampler
mark start
probes_only=${PROBES_ONLY:-0}
((probes_only)) || ab_wide 28672x8192,128256x4096,15360x3840,3840x15360 "$bin/exactq" "$bin/exactq-sw" "$bin/exactq-pm"

# A held bench point: NAME and EXE, then bench options; logs $out/held_NAME.*, marked for the trace.
held() {
  local name=$1 exe=$2
  shift 2
  time_left 70 || { echo "skipped held $name (${SECONDS}s)"; return; }
  mark "$name start"
  timeout 60 "$exe" bench --backend cuda --bits 4 --group 64 --dtype bf16 "$@" \
    --json "$out/held_$name.json" >"$out/held_$name.log" 2>&1
  mark "$name end"
  echo "held $name: $(grep -E 'streaming read of the same' "$out/held_$name.log" | sed -E 's/.*: //') | $(awk '$5 ~ /^[0-9]+$/ {printf "%s M=%s %s us %s; ", $4, $5, $6, $8}' "$out/held_$name.log") (${SECONDS}s)"
}
held big "$bin/exactq" --shapes 28672x8192 --m 1 --kernels qmv --repeats 3000
held llama_head "$bin/exactq" --shapes 128256x4096 --m 1 --kernels qmv --repeats 5000
held gemma_head "$bin/exactq" --shapes 262144x3840 --m 1 --kernels qmv --repeats 2500
for e in e1 e2; do
  held "llama_head_$e" "$bin/exactq-$e" --shapes 128256x4096 --m 1 --kernels qmv --repeats 5000
  held "gemma_head_$e" "$bin/exactq-$e" --shapes 262144x3840 --m 1 --kernels qmv --repeats 2500
done
((probes_only)) && { mark end; echo "(${SECONDS}s elapsed)"; exit 0; }
held llama_head_streamed16 "$bin/exactq" --shapes 128256x4096 --m 16 --kernels qmv_streamed --repeats 300
mark record
record_bench
mark "record end"
record_gtest wide_tests 60 "$bin/exactq_cuda_tests" "$wide_test_filter"
record_parity "4 64 bf16 4096 3840" "8 128 f16 1031 4096" "3 64 bf16 70001 1024" "5 64 f32 2048 3840"
time_left 60 && record_gtest cuda_tests $((${CALL_BUDGET:-570} - SECONDS - 10)) "$bin/exactq_cuda_tests"
mark end
echo "(${SECONDS}s elapsed)"
