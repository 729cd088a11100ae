#!/usr/bin/env bash
# Session 26's H200 call. Build: GENCODE=sm_90a scripts/build_for_gpu.sh, then
# scripts/build_data_pattern_power.sh (now `scripts/build_prototype.sh data_pattern_power`); run with carry [".out/bin"].
# 1. bench/prototypes/data_pattern_power.cu under the 50 ms clock and power trace: the streaming
#    read of constant and of random bytes, and qmv at M = 1 on random and on constant codes, held
#    ~3 s each, on Llama's head, 28672x8192 and Gemma's head (does the data decide the power?);
# 2. qmv, qmv_streamed, qmv_wide and qmv_mma at 8, 2, 3, 5 and 6 bits on Llama's head and
#    28672x8192, M = 1, 2, 4, 8, 16, as time allows (last measured in sessions 17-20).
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session26
start_clock_sampler
mark start
timeout 200 "$bin/data_pattern_power" "$out/marks.txt" 3 >"$out/data_power.log" 2>&1
echo "data_pattern_power: exit $? (${SECONDS}s)"
cat "$out/data_power.log"
mark "bits start"
for b in 8 2 3 5 6; do
  time_left 70 || { echo "skipped bits $b (${SECONDS}s)"; continue; }
  timeout 60 "$bin/exactq" bench --backend cuda --shapes 128256x4096,28672x8192 --m 1,2,4,8,16 \
    --kernels qmv,qmv_streamed,qmv_wide,qmv_mma --bits "$b" --group 64 --dtype bf16 --repeats 20 \
    --json "$out/bits$b.json" --markdown "$out/bits$b.md" >"$out/bits$b.log" 2>&1
  echo "bits $b: exit $? (${SECONDS}s): $(awk '$5 ~ /^[0-9]+$/ && ($5 == 1 || $5 == 16) {printf "%s %s M=%s %s us %s; ", $1, $4, $5, $6, $8}' "$out/bits$b.log")"
done
mark end
echo "(${SECONDS}s elapsed)"
