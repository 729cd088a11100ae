#!/usr/bin/env bash
# The hottest loop of qmv's 4-bit bf16 kernel (V = 1) in the default binary and in every variant
# in .out/bin: opcode histograms, for counting instructions per weight (scripts/sass_loop.py).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
fun=${SASS_FUNCTION:-_ZN6exactq11cuda_detail17qmv_family_kernelILi4ELi1ELi4ELi2EEEvNS0_9QmvParamsE}
for exe in .out/bin/exactq .out/bin/exactq-*; do
  [[ -x $exe ]] || continue
  echo "== $(basename "$exe")"
  cuobjdump -sass -fun "$fun" "$exe" | python3 scripts/sass_loop.py | head -24
done
