#!/usr/bin/env bash
# Session 17, fifth device call: where does 4-bit qmv lose 3-4 points at 262144 rows against 128256
# (the same K, the same per-task work, twice the trips)? main's kernel (exactq-nofixed) on N from
# 65536 to 262144 at K = 4096; the same bytes as one wide matrix (65536 x 16384); group 128 (half
# the parameter bytes); each with the same-run size-matched read. Twice.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session17e
exe=$bin/exactq-nofixed
for pass in 1 2; do
  for group in 64 128; do
    "$exe" bench --backend cuda --shapes 65536x4096,98304x4096,131072x4096,163840x4096,196608x4096,229376x4096,262144x4096,65536x16384,131072x8192 \
      --m 1 --kernels qmv --bits 4 --group $group --dtype bf16 --repeats 20 --json "$out/scan_g${group}_$pass.json" >"$out/scan_g${group}_$pass.log" 2>&1
    echo "== g$group pass $pass"
    paste <(awk '$4=="qmv" {printf "%s %s %s\n", $1, $6, $8}' "$out/scan_g${group}_$pass.log") \
      <(grep "streaming read of" "$out/scan_g${group}_$pass.log" | awk '{printf "read %s %s\n", $9, $13}')
  done
done
