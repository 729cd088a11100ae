#!/usr/bin/env bash
# Session 17, fourth device call: the fixed-K kernel (now with 32-bit parameter indices) issuing the
# next trip's first round during its last round instead of after it (exactq: EXACTQ_QMV_EARLY_CARRY=1;
# exactq-late: 0; exactq-nofixed: the run-time loop, main's kernel). Bytes of exactq first (CUDA == CPU
# mirror on shapes with several trips, the last one split and not), then qmv at M = 1 three times.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session17d
fails=0
for run in "3840 bf16 1" "3840 bf16 0" "3840 f16 1" "3840 f32 0" "4096 bf16 1" "4096 f16 0" "8192 bf16 1" "8192 f32 0"; do
  read -r k dtype split <<<"$run"
  "$bin/exactq" parity --backend cuda --against cpu --kernels qmv,qmv_streamed --n 9001 --k "$k" --bits 4 --group 64 \
    --dtype "$dtype" --m-max 3 --seeds 1 --qmv-split-last-trip "$split" >>"$out/parity.log" 2>&1
  rc=$?
  [[ $rc == 0 ]] || { fails=$((fails + 1)); echo "parity K=$k $dtype split=$split: exit $rc"; }
done
"$bin/exactq" parity --backend cuda --against cpu --kernels qmv --n 16896 --k 3840 --bits 4 --group 64 --dtype bf16 \
  --m-max 2 --seeds 2 --overlap-launch --qmv-l2-prefetch-rounds 3 >>"$out/parity.log" 2>&1 || { fails=$((fails + 1)); echo "parity overlap: fail"; }
echo "parity: $fails failures; $(grep -c PASS "$out/parity.log") PASS lines"
ab_qmv_m1 3 28672x8192,262144x3840,128256x4096,262144x4096,15360x3840,14336x4096 "${exes[@]}"
for pass in 1; do
  for exe in "${exes[@]}"; do
    name=$(basename "$exe")
    "$exe" bench --backend cuda --shapes $shapes --m 1 --kernels qmv --bits 4 --group 64 --dtype bf16 --repeats 20 \
      --overlap-launch --json "$out/qmv_overlap_${name}.json" >"$out/qmv_overlap_${name}.log" 2>&1
    printf '%-16s overlapped: %s\n' "$name" "$(awk '$4=="qmv" {printf "%s %s %s; ", $1, $6, $8}' "$out/qmv_overlap_${name}.log")"
  done
done
