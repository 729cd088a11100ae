#!/usr/bin/env bash
# Session 14, seventh call: for issue 4's next step, the SASS of qmv_mma's 4-bit fragment kernel
# (one and two n-tiles: M <= 8 and M = 16) and its stall reasons on 28672x8192 at M = 1 and 16.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session14g
cuobjdump -sass "$bin/exactq" >"$out/all.sass" 2>&1
for nt in 1 2; do
  pat="qmv_mma_fragments_kernelILi4ELb1ELi${nt}ELi64ELi16ELi2ELb0E"
  awk -v pat="$pat" '/Function : /{p = index($0, pat) > 0} p' "$out/all.sass" >"$out/sass_mma4_nt$nt.txt"
  echo "sass nt=$nt: $(grep -c ';' "$out/sass_mma4_nt$nt.txt") lines"
done
rm -f "$out/all.sass"
for m in 1 16; do
  "$(dirname "$0")/../gpu_ncu_stalls.sh" "mma4_m$m" qmv_mma_fragments 3 "$bin/exactq" bench --backend cuda --shapes 28672x8192 \
    --m $m --kernels qmv_mma --bits 4 --group 64 --dtype bf16 --repeats 2 >"$out/ncu_summary_m$m.txt" 2>&1
  head -24 "$out/ncu_summary_m$m.txt"
done
cp "$final"/ncu_*.txt "$out/" 2>/dev/null && rm -f "$final"/ncu_*.txt
