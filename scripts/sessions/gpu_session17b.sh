#!/usr/bin/env bash
# Session 17, second device call: the L2-prefetch distance swept (0 = off, 2 = main's default from 24
# trips on, 4) on the heads and 28672x8192, with the fixed-K kernel (exactq-idx) and without it
# (exactq-nofixed), twice: is the 262144-row penalty the prefetch's, and does the fixed K gain hold?
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session17b
shapes=262144x3840,262144x4096,128256x3840,128256x4096,28672x8192
for pass in 1 2; do
  for exe in "${exes[@]:1}"; do
    name=$(basename "$exe")
    "$exe" bench --backend cuda --shapes $shapes --m 1 --kernels qmv --bits 4 --group 64 --dtype bf16 --repeats 20 \
      --sweep-qmv-tuning 0:-1,2:-1,4:-1 --json "$out/sweep_${name}_$pass.json" >"$out/sweep_${name}_$pass.log" 2>&1
    echo "== $name pass $pass"
    awk '$4=="qmv" {l=""; for (i = 12; i <= NF; i++) l = l " " $i; printf "%s %s %s%s\n", $1, $6, $8, l}' "$out/sweep_${name}_$pass.log"
  done
done
