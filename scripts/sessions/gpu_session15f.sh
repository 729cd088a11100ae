#!/usr/bin/env bash
# Session 15, a diagnostic for issue 4 (qmv_mma at M = 16, no code change): is 28672x8192's
# M = 16 cost the restaging of x (16 vectors of K = 8192 overflow a block's shared memory) or the
# 2 idle warps per SM? The same bytes with every warp busy (33792 rows = 16 x 2112) and with x
# resident (K = 6144: 38229 rows, and 45056 = 16 x 2816), at M = 1, 8, 12, 16; ncu's stall reasons
# at M = 16 on two of them. Logs archived as $OUT/session15f.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session15f
"$bin/exactq" bench --backend cuda --shapes 28672x8192,33792x8192,38229x6144,45056x6144 --m 1,8,12,16 --kernels qmv_mma \
  --bits 4 --group 64 --dtype bf16 --repeats 30 --json "$out/mma_m16.json" >"$out/mma_m16.log" 2>&1
awk '$4=="qmv_mma" {printf "%-12s M=%-3s %7s %6s\n", $1, $5, $6, $8}' "$out/mma_m16.log"
for shape in 28672x8192 38229x6144; do
  timeout 120 "$(dirname "$0")/../gpu_ncu_stalls.sh" "mma16_$shape" qmv_mma_fragments 3 "$bin/exactq" bench --backend cuda \
    --shapes "$shape" --m 16 --kernels qmv_mma --bits 4 --group 64 --dtype bf16 --repeats 2 >"$out/ncu_summary_$shape.txt" 2>&1
  grep -E "barrier|short_scoreboard|long_scoreboard|issue_active|duration|warps_active|math|mio" "$out/ncu_summary_$shape.txt" | head -12
done
cp "$final"/ncu_*.txt "$out/" 2>/dev/null && rm -f "$final"/ncu_*.txt
