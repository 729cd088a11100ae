#!/usr/bin/env bash
# Session 14, fourth call: why the last-trip build is slower on Gemma's head (call 3): the prefetch
# on and off in both builds, and the SASS of the new 4-bit kernel. Logs as $OUT/session14d.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session14d
fun=_ZN6exactq11cuda_detail17qmv_family_kernelILi4ELi1ELi4ELi2EEEvNS0_9QmvParamsE
cuobjdump -sass -fun "$fun" "$bin/exactq" >"$out/sass_4bit_new.txt" 2>&1
shapes=262144x3840,128256x4096,28672x8192
for rep in 1 2; do
  "$bin/exactq" bench --backend cuda --shapes $shapes --m 1 --kernels qmv --bits 4 --group 64 --dtype bf16 --repeats 40 \
    --sweep-qmv-tuning 0:0,2:0,0:1,2:1 --json "$out/new_$rep.json" >"$out/new_$rep.log" 2>&1
  "$bin/exactq-base" bench --backend cuda --shapes $shapes --m 1 --kernels qmv --bits 4 --group 64 --dtype bf16 --repeats 40 \
    --sweep-qmv-l2-prefetch 0:0,2:0 --json "$out/base_$rep.json" >"$out/base_$rep.log" 2>&1
  echo "== rep $rep $(grep ceiling "$out/new_$rep.log")"
  awk '$4=="qmv" && $5==1 {printf "new  %-12s %7s %6s %s\n", $1, $6, $8, substr($0, index($0, "prefetch"))}' "$out/new_$rep.log"
  awk '$4=="qmv" && $5==1 {printf "base %-12s %7s %6s %s\n", $1, $6, $8, substr($0, index($0, "prefetch"))}' "$out/base_$rep.log"
done
