#!/usr/bin/env bash
# Session 15, last call: why Gemma's head (262144x3840) gained nothing from the carried round when
# Llama's (128256x4096) gained 5 %: N against K, prefetch off and on (launcher's choice), and
# ncu's stall reasons on both heads. Logs archived as $OUT/session15e.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session15e
"$bin/exactq" bench --backend cuda --shapes 262144x3840,262144x4096,128256x3840,128256x4096 --m 1 --kernels qmv --bits 4 \
  --group 64 --dtype bf16 --repeats 30 --sweep-qmv-tuning -1:-1,0:-1 --json "$out/n_k.json" >"$out/n_k.log" 2>&1
awk '$4=="qmv" && $5==1 {printf "%-12s %7s %6s %s\n", $1, $6, $8, substr($0, index($0, "prefetch"))}' "$out/n_k.log"
for shape in 262144x3840 128256x4096; do
  timeout 150 "$(dirname "$0")/../gpu_ncu_stalls.sh" "qmv4_$shape" qmv_family 3 "$bin/exactq" bench --backend cuda \
    --shapes "$shape" --m 1 --kernels qmv --bits 4 --group 64 --dtype bf16 --repeats 2 >"$out/ncu_summary_$shape.txt" 2>&1
  head -24 "$out/ncu_summary_$shape.txt"
done
cp "$final"/ncu_*.txt "$out/" 2>/dev/null && rm -f "$final"/ncu_*.txt
