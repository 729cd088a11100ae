#!/usr/bin/env bash
# Session 17, the record run's second half (the first: SKIP_SANITIZERS=1 SKIP_EXTRA=1 BENCH_M=1,4,16
# scripts/gpu_final.sh): gpu_final.sh's other bit widths and overlapped launches, with the bench
# rotating three weight copies at least (cuda::timing_copies).
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session17j
for b in 2 3 5 6 8; do
  "$bin/exactq" bench --backend cuda --shapes gemma12b,llama3-8b,qwen27b,big --m 1 --kernels qmv \
    --bits "$b" --group 64 --dtype bf16 --repeats 20 --json "$out/bench_qmv_${b}bit.json" >"$out/bench_qmv_${b}bit.log" 2>&1
  echo "qmv ${b}-bit exit $?: $(awk '$4=="qmv" && ($1=="big" || $1 ~ /head|down|gate_up/) {printf "%s %s %s; ", $1, $6, $8}' "$out/bench_qmv_${b}bit.log")"
done
"$bin/exactq" bench --backend cuda --shapes gemma12b,llama3-8b,qwen27b,big --m 1,4,16 --kernels qmv,qmv_mma \
  --bits 4 --group 64 --dtype bf16 --repeats 20 --overlap-launch --json "$out/bench_overlap.json" \
  --markdown "$out/bench_overlap.md" >"$out/bench_overlap.log" 2>&1
echo "bench (overlap) exit $?"
awk '($4=="qmv" || $4=="qmv_mma") && $5==1 {printf "%s %s %s %s %s\n", $1, $4, $6, $8, $9}' "$out/bench_overlap.log"
grep "streaming read of" "$out/bench_overlap.log" | awk '{printf "read %s %s %s\n", $1, $9, $13}'
