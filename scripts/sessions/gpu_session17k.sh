#!/usr/bin/env bash
# Session 17, the honest A/B (three weight copies at least): main (exactq) against the group
# parameters' loads with an L2 fetch hint of 128 bytes (exactq-p128), the fixed-K kernel with
# 32-bit parameter indices (exactq-fx), and both (exactq-fxp). Bytes of the variants first.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session17k
for exe in "${exes[@]:1}"; do
  name=$(basename "$exe")
  "$exe" parity --backend cuda --against cpu --kernels qmv --n 9001 --k 3840 --bits 4 --group 64 --dtype bf16 \
    --m-max 2 --seeds 1 >"$out/parity_$name.log" 2>&1
  echo "parity $name K=3840: exit $?"
  "$exe" parity --backend cuda --against cpu --kernels qmv --n 9001 --k 8192 --bits 4 --group 64 --dtype f32 \
    --m-max 2 --seeds 1 --qmv-split-last-trip 0 >>"$out/parity_$name.log" 2>&1
  echo "parity $name K=8192: exit $?"
done
ab_qmv_m1 3 262144x3840,128256x4096,28672x8192,15360x3840,14336x4096,17408x5120 "${exes[@]}"
