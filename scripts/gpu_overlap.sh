#!/usr/bin/env bash
# The launch-overlap experiment: qmv at M = 1 on every preset with programmatic dependent launch
# on or off and each L2 prefetch distance, in one call, each run with its own same-run ceiling and
# the size-matched streaming read. Usage: scripts/gpu_overlap.sh [bits] (default 4). Logs under $OUT.
set -uo pipefail
bin=.out/bin
bits=${1:-4}
final=${OUT:-/tmp/exactq-out}
out=$(mktemp -d)
mkdir -p "$final"
trap 'tar czf "$final/gpu_overlap_b$bits.tgz" -C "$out" .' EXIT
for overlap in "" "--overlap-launch"; do
  for prefetch in 0 1024 4096 16384; do
    tag="b${bits}_pf${prefetch}${overlap:+_pdl}"
    "$bin/exactq" bench --backend cuda --shapes gemma12b,llama3-8b,qwen27b,big --m 1 --kernels qmv --bits "$bits" \
      --group 64 --dtype bf16 --repeats 20 $overlap --l2-prefetch "$prefetch" --json "$out/overlap_$tag.json" \
      >"$out/overlap_$tag.log" 2>&1
    echo "== $tag exit $?"
    grep -E "ceiling \(|^(big|gemma.head|gemma.down|gemma.gate_up|llama.down|qwen.down|qwen.gate_up) " "$out/overlap_$tag.log" |
      grep -v "streaming read" | awk '{print $1, $6, $8, $9}' | tr '\n' ';'
    echo
    [[ $tag == b${bits}_pf0 ]] && grep "streaming read" "$out/overlap_$tag.log" | awk '{print $1, $7, $9, $13}' | tr '\n' ';' && echo
  done
done
