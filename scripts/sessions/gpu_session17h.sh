#!/usr/bin/env bash
# Session 17, eighth device call: do the group parameters of a single weight copy stay in L2 from
# one timed launch to the next (the codes are loaded evict-first, the parameters are not), which
# would flatter the shapes whose parameters fit the L2 (Llama's head: 33 MB)? exactq-pad (main's
# kernel) with the bench's weight copies raised to at least EXACTQ_MIN_COPIES (an experiment).
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session17h
exe=$bin/exactq-pad
for copies in 1 3 5 1 3; do
  EXACTQ_MIN_COPIES=$copies "$exe" bench --backend cuda --shapes 128256x4096,131072x4096,98304x4096,262144x4096,28672x8192,262144x3840,15360x3840 \
    --m 1 --kernels qmv --bits 4 --group 64 --dtype bf16 --repeats 20 --json "$out/copies_$copies.json" >"$out/copies_$copies.log" 2>&1
  echo "copies >= $copies: $(awk '$4=="qmv" {printf "%s %s %s; ", $1, $6, $8}' "$out/copies_$copies.log")"
done
for copies in 1 3; do
  EXACTQ_MIN_COPIES=$copies "$exe" bench --backend cuda --shapes 128256x4096,262144x3840,28672x8192 --m 1,16 --kernels qmv_mma \
    --bits 4 --group 64 --dtype bf16 --repeats 20 >"$out/mma_copies_$copies.log" 2>&1
  echo "qmv_mma copies >= $copies: $(awk '$4=="qmv_mma" {printf "%s M=%s %s %s; ", $1, $5, $6, $8}' "$out/mma_copies_$copies.log")"
done
