#!/usr/bin/env bash
# Session 18, call 3: x's staging costs 2 us of 14 on 3840x15360 (call 2). exactq-w16: qmv's blocks
# of 16 warps, one per SM, so x is staged once per SM instead of twice; -s2: two rounds in flight
# while x is staged; -w16s2: both. Bytes first (split trips, several trips, K in two tiles).
# Prepared in session 18 and not run there (the device was not lent again); the 16-warp tests and
# sanitizers are scripts/sessions/gpu_session18d.sh, a call of its own. Build here first:
#   TESTS=1 scripts/build_qmv_variant.sh w16 "-DEXACTQ_QMV_WARPS=16"
#   scripts/build_qmv_variant.sh s2 "-DEXACTQ_QMV_STAGE_TWO_ROUNDS=1"
#   scripts/build_qmv_variant.sh w16s2 "-DEXACTQ_QMV_WARPS=16 -DEXACTQ_QMV_STAGE_TWO_ROUNDS=1"
#   scripts/pack_variants.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session18c
for exe in "${exes[@]:1}"; do
  name=$(basename "$exe")
  for args in "--n 9001 --k 3840 --dtype bf16 --bits 4" "--n 40001 --k 4096 --dtype f16 --bits 4" \
    "--n 3000 --k 15360 --dtype bf16 --bits 4" "--n 2001 --k 17408 --dtype f32 --bits 4" \
    "--n 40001 --k 4416 --dtype bf16 --bits 5" "--n 30001 --k 2048 --dtype bf16 --bits 8"; do
    "$exe" parity --backend cuda --against cpu --kernels qmv --group 64 $args --m-max 2 --seeds 1 >>"$out/parity_$name.log" 2>&1
    echo "parity $name $args: exit $?"
  done
done
shapes=262144x3840,128256x4096,28672x8192,15360x3840,3840x15360,14336x4096,4096x14336,17408x5120,5120x17408
ab_qmv_m1 2 "$shapes" "${exes[@]}"
echo "== overlapped"
ovl_qmv_m1 "$shapes" "${exes[@]}"
grep -h "ceiling" "$out"/qmv_exactq_1.log | head -3
