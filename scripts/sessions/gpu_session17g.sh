#!/usr/bin/env bash
# Session 17, seventh device call: is the 3-8 point spread of 4-bit qmv between shapes of the same
# K (98304x4096 87 %, 131072x4096 95 %, 262144x4096 91 %) where the three arrays sit relative to
# each other? exactq-pad (main's kernel) offsets codes, scales and biases inside their allocations
# by EXACTQ_PAD="codes,scales,biases" bytes (an experiment, not on main).
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session17g
exe=$bin/exactq-pad
for pad in 0,0,0 0,4096,0 0,65536,131072 0,1048576,2097152 0,0,1048576 2097152,0,0 0,256,512 0,0,0; do
  EXACTQ_PAD=$pad "$exe" bench --backend cuda --shapes 98304x4096,131072x4096,262144x4096,28672x8192,262144x3840 --m 1 \
    --kernels qmv --bits 4 --group 64 --dtype bf16 --repeats 20 >"$out/pad_$pad.log" 2>&1
  echo "pad $pad: $(awk '$4=="qmv" {printf "%s %s %s; ", $1, $6, $8}' "$out/pad_$pad.log")"
done
grep -h "arrays at" "$out"/pad_0,0,0.log | head -5
