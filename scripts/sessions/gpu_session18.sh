#!/usr/bin/env bash
# Session 18, call 1: whole tasks requested into L2 by the copy engine (cp.async.bulk.prefetch.L2,
# knob EXACTQ_QMV_BULK_PREFETCH): exactq-bp1 (each warp's first task at the start), -bp2 (and the
# next trip's task at each trip), -bp3 (and the trip after), against main. Bytes first; then plain
# and overlapped launches, same call.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session18
for exe in "${exes[@]:1}"; do
  name=$(basename "$exe")
  "$exe" parity --backend cuda --against cpu --kernels qmv --n 9001 --k 3840 --bits 4 --group 64 --dtype bf16 \
    --m-max 2 --seeds 1 >"$out/parity_$name.log" 2>&1
  echo "parity $name 9001x3840: exit $?"
  "$exe" parity --backend cuda --against cpu --kernels qmv --n 40001 --k 4096 --bits 4 --group 64 --dtype f16 \
    --m-max 1 --seeds 1 >>"$out/parity_$name.log" 2>&1
  echo "parity $name 40001x4096: exit $?"
done
shapes=262144x3840,128256x4096,28672x8192,15360x3840,3840x15360,17408x5120,14336x4096
ab_qmv_m1 2 "$shapes" "${exes[@]}"
echo "== overlapped"
ovl_qmv_m1 "$shapes" "${exes[@]}"
echo "== bp2 with the per-line prefetch off / on everywhere"
"$bin/exactq-bp2" bench --backend cuda --shapes "$shapes" --m 1 --kernels qmv --bits 4 --group 64 --dtype bf16 --repeats 20 \
  --sweep-qmv-tuning=0:-1,1:-1 --json "$out/bp2_sweep.json" >"$out/bp2_sweep.log" 2>&1
awk '$4=="qmv" {l=""; for (i = 12; i <= NF; i++) l = l " " $i; printf "%s %s %s%s\n", $1, $6, $8, l}' "$out/bp2_sweep.log"
