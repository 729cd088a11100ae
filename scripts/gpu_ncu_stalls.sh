#!/usr/bin/env bash
# Why a kernel runs at the speed it does: per-instruction stall reasons, pipe utilisation, issue
# activity and DRAM throughput of one launch, from ncu metrics (no GUI sections needed).
# Usage: scripts/gpu_ncu_stalls.sh NAME KERNEL_REGEX LAUNCH_SKIP COMMAND... (writes $OUT/ncu_NAME.txt)
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
out=${OUT:-/tmp/exactq-out}
mkdir -p "$out"
name=$1 regex=$2 skip=$3
shift 3
metrics='regex:(smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio|sm__pipe_.*_cycles_active\.avg\.pct_of_peak_sustained_active|sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active|smsp__issue_active\.avg\.pct_of_peak_sustained_active|smsp__inst_executed\.sum|dram__throughput\.avg\.pct_of_peak_sustained_elapsed|gpu__time_duration\.sum|smsp__warps_active\.avg\.per_cycle_active|smsp__warps_eligible\.avg\.per_cycle_active)'
ncu --clock-control none --kernel-name "regex:$regex" --launch-skip "$skip" --launch-count 1 --metrics "$metrics" "$@" \
  >"$out/ncu_$name.txt" 2>&1
echo "== $name (exit $?)"
grep -vE " 0$| 0\.0+$|n/a" "$out/ncu_$name.txt" | grep -E "stalled|pipe|issue_active|inst_executed.sum|dram|duration|warps_" |
  awk '{print $1, $NF}' | sort -k2 -g -r | head -40
