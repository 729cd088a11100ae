#!/usr/bin/env bash
# One GPU call for tuning: the CUDA tests on the default build, then qmv at M = 1 (and the
# family at a few M) for the default binary and every variant in .out/bin/exactq-* (built by
# scripts/build_variant.sh), all in the same run so their numbers compare.
# Usage: scripts/gpu_compare.sh [tests|notests]. COMPARE_FLAG_SETS: '|'-separated bench flags to
# run each binary with (default: none, then --overlap-launch). Logs archived as $OUT/compare.tgz.
set -uo pipefail
source "$(dirname "$0")/gpu_logs.sh" compare
IFS='|' read -r -a flag_sets <<<"${COMPARE_FLAG_SETS:-|--overlap-launch}"
shapes=${COMPARE_SHAPES:-gemma12b,llama3-8b,qwen27b,big}
if [[ ${1:-tests} == tests ]]; then
  "$bin/exactq_cuda_tests" >"$out/cuda_tests.log" 2>&1
  echo "cuda tests: exit $? $(grep -E '^\[  (PASSED|FAILED)' "$out/cuda_tests.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED" "$out/cuda_tests.log" | head
fi
for exe in "$bin/exactq" "$bin"/exactq-*; do
  [[ -x $exe ]] || continue
  for flags in "${flag_sets[@]}"; do
    name=$(basename "$exe")${flags// /}
    "$exe" bench --backend cuda --shapes "$shapes" --m 1 --kernels qmv --bits 4 --group 64 --dtype bf16 \
      --repeats 30 $flags --json "$out/m1_$name.json" >"$out/m1_$name.log" 2>&1
    echo "== $name: $(grep -E 'ceiling' "$out/m1_$name.log")"
    awk '$4=="qmv" && $5==1 {printf "%s %s %s; ", $1, $6, $8}' "$out/m1_$name.log"
    echo
  done
done
if [[ -n ${COMPARE_FAMILY_M:-} ]]; then
  "$bin/exactq" bench --backend cuda --shapes big,gemma12b --m "$COMPARE_FAMILY_M" --kernels qmv,qmv_streamed,qmv_wide \
    --bits 4 --group 64 --dtype bf16 --repeats 20 --json "$out/family.json" >"$out/family.log" 2>&1
  grep -E "V=|^big|gemma.gate|gemma.head" "$out/family.log"
fi
