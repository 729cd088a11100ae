#!/usr/bin/env bash
# Session 15, first device call: do qmv's small group-parameter requests cost it the read?
# Builds: .out/bin/exactq (main), exactq-pf256 (-DEXACTQ_PARAM_L2_PREFETCH=256: the parameter loads
# carry the L2 256-byte prefetch-size hint), exactq-taskpf (-DEXACTQ_QMV_PARAM_TASK_PREFETCH=1: a
# task's parameter runs requested into L2 at its start). Each variant's bytes are checked against
# the CPU mirror first; then 4-bit qmv at M = 1, the binaries interleaved twice; groups 32 and 128
# (parameters 20 % and 6 % of the bytes, against 11 % at 64); ncu's DRAM counters on 28672x8192.
# Logs archived as $OUT/session15.tgz; the summary is printed.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session15
# 1. Bytes: every variant against the CPU mirror, several trips with a split last trip.
for exe in "${exes[@]}"; do
  name=$(basename "$exe")
  "$exe" parity --backend cuda --against cpu --kernels qmv,qmv_streamed,qmv_wide --n 11651 --k 4416 --bits 4 --group 64 \
    --dtype bf16 --m-max 3 --seeds 5 >"$out/parity_$name.log" 2>&1
  echo "parity $name: exit $?"
done
# 2. 4-bit qmv, M = 1, group 64: the binaries interleaved, twice.
shapes=${SHAPES:-262144x3840,128256x4096,28672x8192,17408x5120,15360x3840,3840x15360}
for pass in 1 2; do
  for exe in "${exes[@]}"; do
    name=$(basename "$exe")
    "$exe" bench --backend cuda --shapes "$shapes" --m 1 --kernels qmv --bits 4 --group 64 --dtype bf16 --repeats 30 \
      --json "$out/g64_${name}_$pass.json" >"$out/g64_${name}_$pass.log" 2>&1
    printf '%-14s g64 pass %s: %s\n' "$name" "$pass" \
      "$(awk '$4=="qmv" && $5==1 {printf "%s %s %s; ", $1, $6, $8}' "$out/g64_${name}_$pass.log")"
  done
done
# 3. Groups 32 and 128, and 8 bits at 64.
for spec in "4 32" "4 128" "8 64"; do
  read -r b gr <<<"$spec"
  for exe in "${exes[@]}"; do
    name=$(basename "$exe")
    "$exe" bench --backend cuda --shapes 262144x3840,128256x4096,28672x8192 --m 1 --kernels qmv --bits "$b" --group "$gr" \
      --dtype bf16 --repeats 30 --json "$out/b${b}g${gr}_$name.json" >"$out/b${b}g${gr}_$name.log" 2>&1
    printf '%-14s %s-bit g%-3s: %s\n' "$name" "$b" "$gr" \
      "$(awk '$4=="qmv" && $5==1 {printf "%s %s %s; ", $1, $6, $8}' "$out/b${b}g${gr}_$name.log")"
  done
done
# 4. ncu: DRAM bytes and throughput, L2 sectors, on 28672x8192 (4-bit g64), main and each variant.
metrics=dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum
for exe in "${exes[@]}"; do
  name=$(basename "$exe")
  timeout 120 ncu --clock-control none --kernel-name regex:qmv_family --launch-skip 3 --launch-count 1 --metrics "$metrics" \
    "$exe" bench --backend cuda --shapes 28672x8192 --m 1 --kernels qmv --bits 4 --group 64 --dtype bf16 --repeats 2 \
    >"$out/ncu_$name.txt" 2>&1
  echo "== ncu $name (exit $?)"
  grep -E "dram__|gpu__time|lts__|issue_active|inst_executed" "$out/ncu_$name.txt" | awk '{print "  ", $1, $(NF-1), $NF}'
done
# 5. SASS: the 4-bit bf16 qmv kernel's loads in each binary (the hint must show, the loop's loads stay first).
fun=_ZN6exactq11cuda_detail17qmv_family_kernelILi4ELi1ELi4ELi2EEEvNS0_9QmvParamsE
for exe in "${exes[@]}"; do
  name=$(basename "$exe")
  cuobjdump -sass -fun "$fun" "$exe" >"$out/sass_$name.txt" 2>&1
  echo "== SASS $name: $(grep -cE '^\s+/\*[0-9a-f]+\*/' "$out/sass_$name.txt") instructions; loads:"
  grep -oE '(LDG|CCTL|LDGSTS)[A-Z0-9_.]*' "$out/sass_$name.txt" | sort | uniq -c
done
