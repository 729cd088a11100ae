#!/usr/bin/env bash
# Session 22, call 1 (carries session 21's prepared call, which never ran: no device was lent).
# qmv at M = 1, 4 bits: two ways to more bytes in flight per SM than main's 16 warps x 2 KB.
# Variants of qmv.cu (build: GENCODE=sm_90a scripts/build_for_gpu.sh, then
# scripts/build_qmv_variant.sh NAME "FLAGS" for each, then scripts/pack_variants.sh):
#   r8w12  -DEXACTQ_QMV_ROWS_AT_4_BITS=8 -DEXACTQ_QMV_WARPS=12 -DEXACTQ_QMV_SM_WARPS=12
#          8 rows per warp, one block of 12 warps per SM, 168 registers, spills 84 bytes (ptxas);
#          12 x 4 KB in flight; the last trip of 28672x8192 splits in 3
#   r8w8   -DEXACTQ_QMV_ROWS_AT_4_BITS=8 -DEXACTQ_QMV_WARPS=8 -DEXACTQ_QMV_SM_WARPS=8
#          8 rows per warp, one block of 8 warps, 238 registers, no spills: main's 32 KB in flight,
#          half the task ends and half the reads of x's digits per byte
#   b3w12  -DEXACTQ_QMV_BUFFERS=3 -DEXACTQ_QMV_WARPS=12 -DEXACTQ_QMV_SM_WARPS=12
#          4 rows, three register buffers (two rounds in flight while one is computed; the carry
#          loads a next task's first two rounds), one block of 12 warps, 168 registers, no spills:
#          12 x 4 KB in flight. 28672x8192 has 4.5 trips there and its last one is not split
#   w12    -DEXACTQ_QMV_WARPS=12 -DEXACTQ_QMV_SM_WARPS=12
#          b3w12's control: main's two buffers in b3w12's block (12 x 2 KB in flight), so that
#          b3w12 against main is read as bytes in flight, not as the block's shape
#   b3p    -DEXACTQ_QMV_BUFFERS=3 -DEXACTQ_QMV_PARAM_BUFFERS=2
#          codes two rounds ahead, group parameters one, in main's blocks (two of 8 warps, 128
#          registers): 16 x 4 KB of codes in flight; spills 44 bytes (ptxas)
# The knobs act on 4-bit qmv only: every other width and kernel of a variant is main's.
# First the same-call A/B of qmv at M = 1 (the bench's output digests, equal to main's, are the
# first check of the variants' bytes), then, as time allows, their bytes against the CPU mirror:
# split trips, several trips with the carry, K of one and two rounds, K in two tiles, f16 and f32.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session22
qmv_m1_section "${exes[@]}"
echo "(${SECONDS}s elapsed)"
echo "== parity of the variants against the CPU mirror (qmv_wide: the negative control)"
for args in "--n 11651 --k 4416 --dtype bf16 --group 64 --m-max 2" "--n 70001 --k 1024 --dtype bf16 --group 64 --m-max 2" \
  "--n 40001 --k 2048 --dtype f16 --group 128 --m-max 2" "--n 9001 --k 3840 --dtype f16 --group 32 --m-max 2" \
  "--n 4099 --k 8192 --dtype f32 --group 128 --m-max 2" "--n 1003 --k 15360 --dtype bf16 --group 64 --m-max 2"; do
  for exe in "${exes[@]:1}"; do
    name=$(basename "$exe")
    time_left 40 || { echo "skipped parity $name $args: ${SECONDS}s elapsed"; continue; }
    timeout 30 "$exe" parity --backend cuda --against cpu --kernels qmv,qmv_wide --bits 4 $args --seeds 1 \
      >>"$out/parity_$name.log" 2>&1
    echo "parity $name $args: exit $?"
  done
done
echo "(${SECONDS}s elapsed)"
