#!/usr/bin/env bash
# Looks inside the qmv-family kernels on the GPU machine for the next tuning step: the SASS of
# the 4-bit bf16 instantiations at V = 1 and V = 2, and ncu summaries of one launch of each on
# 28672x8192. Usage: scripts/gpu_inspect.sh   (logs under $OUT)
set -uo pipefail
out=${OUT:-/tmp/exactq-out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
cuobjdump -sass -fun '_ZN6exactq11cuda_detail17qmv_family_kernelILi4ELi1ELi4ELi2EEEvNS0_9QmvParamsE' .out/bin/exactq >"$out/sass_qmv_4bit_v1.txt" 2>&1
cuobjdump -sass -fun '_ZN6exactq11cuda_detail17qmv_family_kernelILi4ELi2ELi4ELin1EEEvNS0_9QmvParamsE' .out/bin/exactq >"$out/sass_qmv_4bit_v2.txt" 2>&1
wc -l "$out"/sass_*.txt
for spec in "qmv 1" "qmv_streamed 2"; do
  read -r kernel m <<<"$spec"
  ncu --clock-control none --kernel-name regex:qmv_family --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section InstructionStats \
    .out/bin/exactq bench --backend cuda --repeats 1 --shapes big --m "$m" --kernels "$kernel" --bits 4 --group 64 --dtype bf16 \
    >"$out/ncu_${kernel}_m$m.txt" 2>&1
  echo "== $kernel M=$m"
  grep -E "Duration|DRAM Throughput|Issued Warp Per Scheduler|Issued Instructions  |Warp Cycles Per Issued|Achieved Occupancy|Registers Per" "$out/ncu_${kernel}_m$m.txt"
done
