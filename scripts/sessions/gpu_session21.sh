#!/usr/bin/env bash
# Session 21, call 1: 8 rows per warp at 4 bits, with the loads kept first (session 14's open lead;
# session 5's loss predates the integer dot). A task of 8 rows halves the task ends and the reads
# of x's digits per byte, and a round is 4 KB. Variants of qmv.cu (build: GENCODE=sm_90a
# scripts/build_for_gpu.sh, then scripts/build_qmv_variant.sh NAME "FLAGS", scripts/pack_variants.sh):
#   r8w12  -DEXACTQ_QMV_ROWS_AT_4_BITS=8 -DEXACTQ_QMV_WARPS=12 -DEXACTQ_QMV_SM_WARPS=12
#          one block of 12 warps per SM, 168 registers, spills 84 bytes (ptxas); the last trip of
#          28672x8192 splits in 3
#   r8w8   -DEXACTQ_QMV_ROWS_AT_4_BITS=8 -DEXACTQ_QMV_WARPS=8 -DEXACTQ_QMV_SM_WARPS=8
#          one block of 8 warps per SM, 238 registers, no spills: the bytes in flight of main
# First the variants' bytes against the CPU mirror, then the same-call A/B of qmv at M = 1.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session21
echo "== parity of the variants against the CPU mirror (qmv_wide: the negative control)"
for exe in "${exes[@]:1}"; do
  name=$(basename "$exe")
  for args in "--n 28672 --k 8192 --dtype bf16 --group 64 --m-max 2" "--n 11651 --k 4416 --dtype bf16 --group 64 --m-max 3" \
    "--n 9001 --k 3840 --dtype f16 --group 32 --m-max 3" "--n 4099 --k 8192 --dtype f32 --group 128 --m-max 3" \
    "--n 1003 --k 15360 --dtype bf16 --group 64 --m-max 3"; do
    time_left 200 || { echo "skipped parity $name: ${SECONDS}s elapsed"; break; }
    timeout 60 "$exe" parity --backend cuda --against cpu --kernels qmv,qmv_wide --bits 4 $args --seeds 1 \
      >>"$out/parity_$name.log" 2>&1
    echo "parity $name $args: exit $?"
  done
done
echo "(${SECONDS}s elapsed)"
qmv_m1_section "${exes[@]}"
echo "(${SECONDS}s elapsed)"
