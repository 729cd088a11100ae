#!/usr/bin/env bash
# Session 17, sixth device call: qmv's group-parameter loads with an L2 fetch-size hint
# (ld.global.L2::64B/128B/256B; exactq-pN, -DEXACTQ_QMV_PARAM_FETCH=N; p0 is main's kernel). At g64 the
# parameters are 11 % of the bytes but each load is one 32-byte sector per row and round, and call 5
# found 4-bit g128 5 % more efficient per byte than g64 on the same codes. Bytes first, then M = 1 twice.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session17f
for exe in "${exes[@]:1}"; do
  name=$(basename "$exe")
  "$exe" parity --backend cuda --against cpu --kernels qmv --n 9001 --k 3840 --bits 4 --group 64 --dtype bf16 \
    --m-max 2 --seeds 1 >"$out/parity_$name.log" 2>&1
  echo "parity $name: exit $? $(grep -c PASS "$out/parity_$name.log") PASS"
done
cuobjdump -sass "$bin/exactq-p128" 2>/dev/null | grep -oE "LDG[A-Z0-9_.]*" | sort | uniq -c | head -20
ab_qmv_m1 2 28672x8192,262144x3840,128256x4096,98304x4096,131072x4096,262144x4096,15360x3840,14336x4096,17408x5120 "${exes[@]:1}"
