#!/usr/bin/env bash
# Session 27's H200 call (not lent in session 27: it ran on H100s only as calls 4 and 5, with
# ON_H100=ab). On the H100, qmv's cp.async ring (EXACTQ_QMV_ASYNC_STAGES) is bitwise equal to the
# CPU mirror and slower than main, 1 % at the register pipeline's depth (a2) and 1-1.5 % more per
# further round, where main already reaches 94-96 % of the read. The H200 moves 43 % more bytes per
# SM, and session 6's request pattern read faster there with two rounds per batch: does the ring
# pay on the H200?
# Build (here): GENCODE=sm_90a scripts/build_for_gpu.sh; then scripts/build_qmv_variant.sh NAME
# FLAGS for a2 "-DEXACTQ_QMV_ASYNC_STAGES=2", a3 "…=3", a4 "…=4" (with TESTS=1) and
# a4p "-DEXACTQ_QMV_ASYNC_STAGES=4 -DEXACTQ_QMV_ASYNC_PARAM_PREFETCH=1" (each round's group
# parameters also requested into L2); ALL=1 scripts/pack_variants.sh (about 21 MB). Run with carry
# [".out/bin"] when `status` shows the kind nvidia-h200; on any other card it stops at once
# (ON_H100=ab: one pass of main a2 a4 main first).
# 1. parity of a2, a4, a4p against the CPU mirror; qmv at M = 1, main a2 a3 a4 a4p, two passes on
#    the three large shapes, then overlapped;
# 2. held (--sustain 2) main and a4 on Llama's head and 28672x8192 under the power trace;
# 3. as time allows, session 26's unrun sections: the bench burst and sustained at M = 1 and 16;
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session27b
start_clock_sampler
mark start
variants=("$bin/exactq-a2" "$bin/exactq-a3" "$bin/exactq-a4" "$bin/exactq-a4p")
# ON_H100=ab (when not on an H200): one pass of main a2 a4 main, then stop.
if ! grep -q H200 "$out/gpu.txt"; then
  if [[ ${ON_H100:-} == ab ]]; then
    ab_qmv_m1 1 128256x4096,28672x8192,262144x3840 "$bin/exactq" "$bin/exactq-a2" "$bin/exactq-a4" "$bin/exactq"
    grep -h "ceiling" "$out"/qmv_exactq_1.log | head -1
  fi
  echo "not an H200: stopping (${SECONDS}s)"
  exit 3
fi
variant_parity "--n 28673 --k 8192 --dtype bf16 --group 64 --m-max 1" -- "$bin/exactq-a2" "$bin/exactq-a4" "$bin/exactq-a4p"
grep -hE "FAIL|PASS" "$out"/parity_exactq-a*.log
echo "== qmv, M = 1"
ab_qmv_m1 2 128256x4096,28672x8192,262144x3840 "$bin/exactq" "${variants[@]}"
grep -h "ceiling" "$out"/qmv_exactq_1.log | head -2
echo "(${SECONDS}s elapsed)"
time_left 60 && ovl_qmv_m1 128256x4096,28672x8192,262144x3840 "$bin/exactq" "${variants[@]}"
HELD_LIMIT=40
for exe in exactq exactq-a4; do
  held "sus_$exe" "$bin/$exe" --shapes 128256x4096,28672x8192 --m 1 --kernels qmv --repeats 20 --sustain 2
done
ms=1,16
shapes=128256x4096,28672x8192,262144x3840
common=(bench --backend cuda --shapes "$shapes" --bits 4 --group 64 --dtype bf16 --repeats 20 --m "$ms"
  --kernels qmv,qmv_streamed,qmv_wide,qmv_mma)
summary() { awk '$4 ~ /^qmv/ && $5 ~ /^[0-9]+$/ {printf "%s %s M=%s %s us %s; ", $1, $4, $5, $6, $8} END {print ""}' "$1"; }
if time_left 100; then
  mark burst
  timeout 90 "$bin/exactq" "${common[@]}" --json "$out/burst.json" --markdown "$out/burst.md" >"$out/burst.log" 2>&1
  echo "burst: exit $? (${SECONDS}s)"; summary "$out/burst.log"
fi
if time_left 130; then
  mark sustained
  timeout $((${CALL_BUDGET:-570} - SECONDS - 20)) "$bin/exactq" "${common[@]}" --sustain 2 \
    --json "$out/sustained.json" --markdown "$out/sustained.md" >"$out/sustained.log" 2>&1
  echo "sustained: exit $? (${SECONDS}s)"; summary "$out/sustained.log"
fi
# 4. as time allows, main's qmv_wide tests (its packed grid at M > 5, a05ea6a, never run on an H200).
time_left 70 && record_gtest wide_tests 60 "$bin/exactq_cuda_tests" "$wide_test_filter"
mark end
echo "(${SECONDS}s elapsed)"
