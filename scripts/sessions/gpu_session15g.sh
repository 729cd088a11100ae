#!/usr/bin/env bash
# Session 15, the last call: qmv_mma with each group's two k-steps in independent accumulators
# (exactq-splitacc, -DEXACTQ_MMA_SPLIT_ACCUMULATORS=1: another order, the same at every M) against
# main: its width invariance and its CPU-reference check first, then M = 1, 8, 16 twice.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session15g
for exe in "${exes[@]:1}"; do
  name=$(basename "$exe")
  "$exe" parity --backend cuda --against cpu --kernels qmv,qmv_mma --n 4096 --k 3840 --bits 4 --group 64 --dtype bf16 \
    --m-max 24 --seeds 3 >"$out/parity_$name.log" 2>&1
  echo "parity $name: exit $? $(tail -1 "$out/parity_$name.log" | cut -c1-200)"
done
for pass in 1 2; do
  for exe in "${exes[@]}"; do
    name=$(basename "$exe")
    "$exe" bench --backend cuda --shapes 28672x8192,262144x3840,128256x4096,17408x5120 --m 1,8,16 --kernels qmv_mma \
      --bits 4 --group 64 --dtype bf16 --repeats 20 --json "$out/mma_${name}_$pass.json" >"$out/mma_${name}_$pass.log" 2>&1
    printf '%-16s %s: %s\n' "$name" "$pass" "$(awk '$4=="qmv_mma" {printf "%s M=%s %s; ", $1, $5, $6}' "$out/mma_${name}_$pass.log")"
  done
done
