#!/usr/bin/env bash
# One GPU call for a qmv_mma change: the checks of scripts/gpu_final.sh (CUDA tests, parity of
# every kernel against the CPU mirror, qmv_mma to M = 64, memcheck and racecheck) on the default
# binary, then qmv_mma at M = 1, 4, 16 on every preset for the default binary and for each
# variant .out/bin/exactq-* (e.g. the previous code, built by scripts/build_variant.sh), all in
# the same call, and the opcode histogram of the 4-bit bf16 kernel's hottest loop.
# Logs and JSON under $OUT (mma_NAME.json / .log, final.txt).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
bin=.out/bin
"$(dirname "$0")/gpu_unpack.sh"
out=${OUT:-/tmp/exactq-out}
mkdir -p "$out"
# NO_CHECKS=1: the benchmarks only (a comparison of variants, the tests binary not carried).
[[ ${NO_CHECKS:-0} == 1 ]] || SKIP_BENCH=1 bash scripts/gpu_final.sh 2>&1 | grep -v "^\[ info" | tee "$out/final.txt"
for exe in "$bin/exactq" "$bin"/exactq-*; do
  [[ -x $exe ]] || continue
  name=$(basename "$exe")
  "$exe" bench --backend cuda --shapes gemma12b,llama3-8b,qwen27b,big --m 1,4,16 --kernels qmv_mma --bits 4 \
    --group 64 --dtype bf16 --repeats 20 --json "$out/mma_$name.json" >"$out/mma_$name.log" 2>&1
  echo "== $name $(grep ceiling "$out/mma_$name.log")"
  awk '$4=="qmv_mma" {printf "%s M%s %s %s; ", $1, $5, $6, $8}' "$out/mma_$name.log"
  echo
done
# The first copy of the kernel in the dump (one architecture), through scripts/sass_loop.py.
cuobjdump -sass "$bin/exactq" >/tmp/exactq_all.sass
awk -v pat="${SASS_KERNEL:-qmv_mma_kernelILi4ELb1ELi1ELi64E}" '/Function : /{ if (seen) exit; on = index($0, pat) > 0; if (on) seen = 1 } on' \
  /tmp/exactq_all.sass >/tmp/qmv_mma_4b_bf16.sass
python3 scripts/sass_loop.py </tmp/qmv_mma_4b_bf16.sass >"$out/mma_sass_loop.txt"
head -30 "$out/mma_sass_loop.txt"
