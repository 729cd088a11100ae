#!/usr/bin/env bash
# Session 14, second call: the SASS of 4-bit qmv with and without the prefetch code compiled in
# (call 1: 8 % apart with the prefetch off), the prefetch's effect separated by N and K on
# head-sized matrices, and qmv_mma after the revert of its prefetch. Logs as $OUT/session14b.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session14b
for bits in 4 2; do
  fun=_ZN6exactq11cuda_detail17qmv_family_kernelILi${bits}ELi1ELi4ELi2EEEvNS0_9QmvParamsE
  for exe in "$bin/exactq" "$bin"/exactq-*; do
    [[ -x $exe ]] || continue
    cuobjdump -sass -fun "$fun" "$exe" >"$out/sass_${bits}bit_$(basename "$exe").txt" 2>&1
    echo "sass $bits-bit $(basename "$exe"): $(grep -c ';' "$out/sass_${bits}bit_$(basename "$exe").txt") lines"
  done
done
"$bin/exactq" bench --backend cuda --shapes 262144x3840,262144x4096,128256x3840,128256x4096,28672x8192,28672x7680 \
  --m 1 --kernels qmv --bits 4 --group 64 --dtype bf16 --repeats 50 --sweep-qmv-l2-prefetch "${SWEEP:--1:-1,0:0,2:0,3:0,0:0}" \
  --json "$out/sweep_nk.json" >"$out/sweep_nk.log" 2>&1
echo "== sweep N/K: exit $? $(grep -E 'ceiling' "$out/sweep_nk.log")"
awk '$4=="qmv" && $5==1 {printf "%-12s %7s %6s %s\n", $1, $6, $8, substr($0, index($0, "prefetch"))}' "$out/sweep_nk.log"
"$bin/exactq" bench --backend cuda --shapes 28672x8192,262144x3840,15360x3840 --m 1,16 --kernels qmv,qmv_mma --bits 4 \
  --group 64 --dtype bf16 --repeats 30 --json "$out/mma_after_revert.json" >"$out/mma_after_revert.log" 2>&1
echo "== qmv_mma after the revert: exit $?"
awk '$4=="qmv_mma" || ($4=="qmv" && $5==1) {printf "%-12s %-8s M=%-2s %7s %6s\n", $1, $4, $5, $6, $8}' "$out/mma_after_revert.log"
