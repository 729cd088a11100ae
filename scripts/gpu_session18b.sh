#!/usr/bin/env bash
# Session 18, call 2: where qmv's time goes on the 33-50 MB shapes (timing only; these variants
# compute wrong bytes on purpose): exactq-x1 skips x's staging, -x2 replaces the dot by an xor of
# the loaded words, -x3 both; against main, plain and overlapped launches, same call.
set -uo pipefail
source "$(dirname "$0")/gpu_logs.sh" session18b
shapes=262144x3840,128256x4096,28672x8192,15360x3840,3840x15360,17408x5120,14336x4096
ab_qmv_m1 2 "$shapes" "${exes[@]}"
echo "== overlapped"
for exe in "${exes[@]}"; do
  name=$(basename "$exe")
  "$exe" bench --backend cuda --shapes "$shapes" --m 1 --kernels qmv --bits 4 --group 64 --dtype bf16 --repeats 20 \
    --overlap-launch --json "$out/ovl_$name.json" >"$out/ovl_$name.log" 2>&1
  printf '%-16s ovl: %s\n' "$name" "$(awk '$4=="qmv" {printf "%s %s %s; ", $1, $6, $8}' "$out/ovl_$name.log")"
done
grep -h -i "ceiling\|size-matched\|read" "$out"/qmv_exactq_1.log | head -20
