#!/usr/bin/env bash
# Session 16, the side-by-side table on the final build (call 4 ran its tests, parity and
# sanitizers): every kernel on every preset at M = 1, 4, 16 and the PyTorch anchors, one call.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session16e
"$bin/exactq" bench --backend cuda --shapes gemma12b,llama3-8b,qwen27b,big --m 1,4,16 \
  --kernels qmv,qmv_streamed,qmv_wide,qmv_mma --bits 4 --group 64 --dtype bf16 --repeats 20 \
  --json "$out/bench.json" --markdown "$out/bench.md" --plot "$out/bench.svg" >"$out/bench.log" 2>&1
echo "bench exit $?"
grep -E "ceiling|^(big|gemma.head|gemma.gate_up|gemma.down|llama.head) " "$out/bench.log" | grep -vE "qmv_wide" | head -60
python3 bench/anchors.py --shapes 28672x8192,262144x3840,15360x3840,3840x15360 --m 1,4,16 --json "$out/anchors.json" \
  >"$out/anchors.log" 2>&1
echo "anchors exit $?"
grep -E "cublas|tinygemm" "$out/anchors.log"
