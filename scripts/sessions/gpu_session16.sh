#!/usr/bin/env bash
# Session 16, first device call: qmv with the rows' butterflies merged (EXACTQ_QMV_SCATTER_BUTTERFLY)
# and the park branch out of the round loop (EXACTQ_QMV_HOIST_PARK), variants from
# scripts/build_qmv_variant.sh packed by scripts/pack_variants.sh. Each variant's bytes against the
# CPU mirror first (every width, split last trips, several trips, K = 3840, three dtypes); then
# qmv at M = 1 (4 bits: two interleaved passes and one overlapped; 5 and 8 bits: one pass), and
# the hot loop's SASS. Logs archived as $OUT/session16.tgz; the summary is printed.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session16
# 1. Bytes.
for exe in "${exes[@]:1}"; do
  name=$(basename "$exe")
  fails=0
  for shape in "11651 4416 4 64 bf16" "5003 3840 4 32 f16" "70001 4096 4 128 f32" "65536 3840 4 64 bf16" \
    "28672 4096 4 64 bf16" "28672 4096 2 64 bf16" "11651 3840 3 32 f16" "28672 4096 5 64 bf16" \
    "11651 3840 6 128 f32" "28672 4096 8 64 bf16" "7001 3840 8 32 f16"; do
    read -r n k b gr dt <<<"$shape"
    "$exe" parity --backend cuda --against cpu --kernels qmv,qmv_streamed,qmv_wide --n "$n" --k "$k" --bits "$b" \
      --group "$gr" --dtype "$dt" --m-max 2 --seeds 5 >>"$out/parity_$name.log" 2>&1
    rc=$?
    [[ $rc == 0 ]] || { fails=$((fails + 1)); echo "parity $name ${n}x$k b$b g$gr $dt: exit $rc"; }
  done
  "$exe" parity --backend cuda --against cpu --kernels qmv --n 28672 --k 4096 --m-max 2 --seeds 6 --overlap-launch \
    >>"$out/parity_$name.log" 2>&1 || { fails=$((fails + 1)); echo "parity $name overlapped: failed"; }
  echo "parity $name: $fails failures"
done
# 2. qmv at M = 1, group 64, bf16.
shapes=${SHAPES:-262144x3840,128256x4096,28672x8192,17408x5120,15360x3840,3840x15360}
run() {  # exe bits pass
  local exe=$1 bits=$2 pass=$3 name flags=()
  name=$(basename "$exe")
  [[ $pass == overlap ]] && flags=(--overlap-launch)
  "$exe" bench --backend cuda --shapes "$shapes" --m 1 --kernels qmv --bits "$bits" --group 64 --dtype bf16 --repeats 30 \
    "${flags[@]}" --json "$out/b${bits}_${name}_$pass.json" >"$out/b${bits}_${name}_$pass.log" 2>&1
  printf '%-16s b%s %-7s: %s\n' "$name" "$bits" "$pass" \
    "$(awk '$4=="qmv" && $5==1 {printf "%s %s %s; ", $1, $6, $8}' "$out/b${bits}_${name}_$pass.log")"
}
for pass in 1 2 overlap; do for exe in "${exes[@]}"; do run "$exe" 4 "$pass"; done; done
for bits in 5 8; do for exe in "${exes[@]}"; do run "$exe" "$bits" 1; done; done
# 3. The hot loop of the 4-bit bf16 kernel in each binary, and the end of a trip.
for exe in "${exes[@]}"; do
  name=$(basename "$exe")
  fun=_ZN6exactq11cuda_detail17qmv_family_kernelILi4ELi1ELi4ELi2EEEvNS0_9QmvParamsE
  cuobjdump -sass -fun "$fun" "$exe" >"$out/sass_${name}.txt" 2>&1 || continue
  python3 scripts/sass_loop.py --body <"$out/sass_${name}.txt" >"$out/loop_${name}.txt"
  echo "== SASS $name: $(head -1 "$out/loop_${name}.txt"); whole kernel $(grep -cE '^\s+/\*[0-9a-f]{4}\*/' "$out/sass_${name}.txt") lines"
  echo "   SHFL $(grep -c SHFL "$out/sass_${name}.txt"), BSSY $(grep -c BSSY "$out/loop_${name}.txt") in loop"
done
