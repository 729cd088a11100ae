#!/usr/bin/env bash
# One GPU call for qmv_mma: all CUDA tests, parity at M = 1..64 against its own chain (qmv and
# qmv_wide as controls, the CPU reference within a tolerance), and the benchmark next to qmv.
set -uo pipefail
bin=.out/bin
out=${OUT:-/tmp/exactq-out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
"$bin/exactq_cuda_tests" >"$out/cuda_tests.log" 2>&1
echo "cuda tests: exit $?"; grep -E "^\[  (PASSED|FAILED)|info" "$out/cuda_tests.log"
: >"$out/parity_mma.log"
for spec in "4 64 bf16 4096 3840" "8 128 f16 1031 4096" "4 32 f16 517 8192" "8 64 bf16 2048 3840"; do
  read -r b g d n k <<<"$spec"
  "$bin/exactq" parity --backend cuda --against cpu --kernels qmv_mma,qmv --n "$n" --k "$k" --bits "$b" --group "$g" \
    --dtype "$d" --m-max 64 --seeds 1 --json "$out/parity_mma_${b}b_g${g}_${d}.json" >>"$out/parity_mma.log" 2>&1
  echo "parity exit $?: $(tail -1 "$out/parity_mma.log" | cut -c1-200)"
done
"$bin/exactq" bench --backend cuda --shapes "${BENCH_SHAPES:-gemma12b,llama3-8b,qwen27b,big}" --m "${BENCH_M:-1,2,4,8,16}" \
  --kernels qmv,qmv_mma --bits 4 --group 64 --dtype bf16 --repeats 20 \
  --json "$out/bench_mma.json" --markdown "$out/bench_mma.md" --plot "$out/bench_mma.svg" >"$out/bench_mma.log" 2>&1
echo "bench exit $?"
grep -E "ceiling|qmv_mma" "$out/bench_mma.log" | head -80
for exe in "$bin"/exactq-*; do  # tuning variants (scripts/build_variant.sh), same run
  [[ -x $exe ]] || continue
  name=$(basename "$exe")
  "$exe" bench --backend cuda --shapes gemma12b,big --m 1,16 --kernels qmv,qmv_mma --bits 4 --group 64 --dtype bf16 \
    --repeats 20 --json "$out/bench_$name.json" >"$out/bench_$name.log" 2>&1
  echo "== $name"; grep -E "ceiling|qmv(_mma)? +(1|16) " "$out/bench_$name.log" | grep -E "ceiling|big|gate_up|head"
  "$exe" parity --backend cuda --against cpu --kernels qmv_mma --n 2048 --k 4096 --bits 4 --group 64 --dtype f16 \
    --m-max 17 --seeds 1 >"$out/parity_$name.log" 2>&1
  echo "parity exit $?: $(grep -E 'vs cpu' "$out/parity_$name.log" | cut -c1-160)"
done
