#!/usr/bin/env bash
# Session 15, second device call: qmv at 4 bits with a deeper register ring of smaller rounds
# (EXACTQ_QMV_RING_DEPTH, EXACTQ_QMV_FOUR_ROWS_MAX_BITS; variants from scripts/build_qmv_variant.sh
# packed by scripts/pack_variants.sh): rRdD = R rows per warp, D register buffers. Each variant's
# bytes against the CPU mirror first (several trips, a split last trip, K = 3840 with a partial
# last round); then 4-bit qmv at M = 1, the binaries interleaved twice, and once overlapped; the
# hot loop's SASS of each. Logs archived as $OUT/session15b.tgz; the summary is printed.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session15b
# 1. Bytes.
for exe in "${exes[@]:1}"; do
  name=$(basename "$exe")
  for shape in "11651 4416 64 bf16" "5003 3840 32 f16" "70001 4096 128 f32"; do
    read -r n k gr dt <<<"$shape"
    "$exe" parity --backend cuda --against cpu --kernels qmv,qmv_streamed,qmv_wide --n "$n" --k "$k" --bits 4 \
      --group "$gr" --dtype "$dt" --m-max 4 --seeds 7 >>"$out/parity_$name.log" 2>&1
    echo "parity $name ${n}x$k g$gr $dt: exit $?"
  done
done
# 2. 4-bit qmv, M = 1, group 64: interleaved twice, then overlapped once.
shapes=${SHAPES:-262144x3840,128256x4096,28672x8192,17408x5120,15360x3840,3840x15360}
for pass in 1 2 overlap; do
  flags=()
  [[ $pass == overlap ]] && flags=(--overlap-launch)
  for exe in "${exes[@]}"; do
    name=$(basename "$exe")
    "$exe" bench --backend cuda --shapes "$shapes" --m 1 --kernels qmv --bits 4 --group 64 --dtype bf16 --repeats 30 \
      "${flags[@]}" --json "$out/g64_${name}_$pass.json" >"$out/g64_${name}_$pass.log" 2>&1
    printf '%-12s %-7s: %s\n' "$name" "$pass" \
      "$(awk '$4=="qmv" && $5==1 {printf "%s %s %s; ", $1, $6, $8}' "$out/g64_${name}_$pass.log")"
  done
done
# 3. The hot loop of the 4-bit bf16 kernel in each binary (2 or 4 rows).
for exe in "${exes[@]}"; do
  name=$(basename "$exe")
  for rows in 4 2; do
    fun=_ZN6exactq11cuda_detail17qmv_family_kernelILi4ELi1ELi${rows}ELi2EEEvNS0_9QmvParamsE
    cuobjdump -sass -fun "$fun" "$exe" >"$out/sass_${name}_r$rows.txt" 2>&1 || continue
    grep -q LDG "$out/sass_${name}_r$rows.txt" || continue
    python3 scripts/sass_loop.py --body <"$out/sass_${name}_r$rows.txt" >"$out/loop_${name}_r$rows.txt"
    echo "== SASS $name rows $rows: $(head -1 "$out/loop_${name}_r$rows.txt")"
    grep -E "^\s+(IDP|LDG|LDS|BRA|STL|LDL)\s" "$out/loop_${name}_r$rows.txt" | tr -s ' ' | tr '\n' ';'
    echo
  done
done
# 4. Where the carried loads sit in the 4-bit kernel: the order of global loads and shuffles.
for exe in "${exes[@]}"; do
  name=$(basename "$exe")
  f="$out/sass_${name}_r4.txt"
  [[ -s $f ]] || continue
  echo "== $name: LDG/SHFL/BAR/EXIT order (run-length): $(grep -oE '(LDG|SHFL|BAR|EXIT|STG)' "$f" | uniq -c | tr -s ' ' | tr '\n' ',')"
done
