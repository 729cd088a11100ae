#!/usr/bin/env bash
# Session 16, second device call: qmv_mma with the 4-bit codes left as offset + q by the bf16
# conversion (one subtraction fewer per pair) and the offset taken back through the bias
# (exactq-off128: 128 + q; exactq-off16: 16 + q, codes shifted to bits 3-6; -DEXACTQ_MMA_CODE_OFFSET4)
# against main, which now also has qmv's merged butterflies. Width invariance and the CPU-reference
# check of each variant first (both layouts, odd N, K = 3840, two n-tiles), then qmv_mma at
# M = 1, 8, 16 twice and qmv at M = 1 once; the hot loops' SASS at one and two n-tiles.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session16b
for exe in "${exes[@]:1}"; do
  name=$(basename "$exe")
  fails=0
  for shape in "4096 3840 64 fragments" "5003 4096 32 mlx" "28672 4096 128 fragments" "1029 8192 64 mlx"; do
    read -r n k gr layout <<<"$shape"
    "$exe" parity --backend cuda --against cpu --kernels qmv,qmv_mma --n "$n" --k "$k" --bits 4 --group "$gr" --dtype bf16 \
      --m-max 20 --seeds 3 --mma-layout "$layout" >>"$out/parity_$name.log" 2>&1
    rc=$?
    [[ $rc == 0 ]] || { fails=$((fails + 1)); echo "parity $name ${n}x$k g$gr $layout: exit $rc"; }
  done
  echo "parity $name: $fails failures; $(grep -c PASS "$out/parity_$name.log") PASS lines"
done
for pass in 1 2; do
  for exe in "${exes[@]}"; do
    name=$(basename "$exe")
    "$exe" bench --backend cuda --shapes 28672x8192,262144x3840,128256x4096,17408x5120 --m 1,8,16 --kernels qmv_mma \
      --bits 4 --group 64 --dtype bf16 --repeats 20 --json "$out/mma_${name}_$pass.json" >"$out/mma_${name}_$pass.log" 2>&1
    printf '%-16s %s: %s\n' "$name" "$pass" "$(awk '$4=="qmv_mma" {printf "%s M=%s %s %s; ", $1, $5, $6, $8}' "$out/mma_${name}_$pass.log")"
  done
done
"$bin/exactq" bench --backend cuda --shapes 28672x8192,262144x3840,128256x4096,17408x5120 --m 1 --kernels qmv --bits 4 \
  --group 64 --dtype bf16 --repeats 20 >"$out/qmv_m1.log" 2>&1
echo "qmv M=1: $(awk '$4=="qmv" {printf "%s %s %s; ", $1, $6, $8}' "$out/qmv_m1.log")"
for exe in "${exes[@]}"; do
  name=$(basename "$exe")
  cuobjdump -sass "$exe" >"$out/all_sass_$name.txt" 2>/dev/null
  for nt in 1 2; do
    python3 - "$out/all_sass_$name.txt" "$nt" >"$out/loop_${name}_nt$nt.txt" <<'PY'
import re, subprocess, sys
text = open(sys.argv[1]).read()
want = f"qmv_mma_fragments_kernelILi4ELb1ELi{sys.argv[2]}ELi64ELi16ELi2ELb0E"
for block in text.split("Function : ")[1:]:
    if block.split("\n", 1)[0].strip().find(want) >= 0:
        out = subprocess.run(["python3", "scripts/sass_loop.py"], input=block, capture_output=True, text=True).stdout
        print(out)
        break
PY
    echo "== $name NT=$nt: $(head -1 "$out/loop_${name}_nt$nt.txt")"
    grep -E "^\s+(HMMA|LOP3|SHF|HADD2|HFMA2|FFMA|LDS|LDG|IMAD|PRMT)\s" "$out/loop_${name}_nt$nt.txt" | tr -s ' ' | tr '\n' ';'
    echo
  done
  rm -f "$out/all_sass_$name.txt"
done
