#!/usr/bin/env bash
# Session 17, last call: qmv's two launch knobs (L2 prefetch rounds, last-trip split) re-swept with
# the honest copy rule, since both rules were set with the flattering copies (session 14).
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session17m
for pass in 1 2; do
  "$bin/exactq" bench --backend cuda --shapes 28672x8192,128256x4096,262144x3840,15360x3840,17408x5120,5120x17408 --m 1 --kernels qmv \
    --bits 4 --group 64 --dtype bf16 --repeats 20 --sweep-qmv-tuning=-1:-1,0:-1,1:-1,2:-1,-1:0,-1:1 \
    --json "$out/sweep_$pass.json" >"$out/sweep_$pass.log" 2>&1
  echo "== pass $pass"
  awk '$4=="qmv" {l=""; for (i = 12; i <= NF; i++) l = l " " $i; printf "%s %s %s%s\n", $1, $6, $8, l}' "$out/sweep_$pass.log"
done
