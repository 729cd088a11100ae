#!/usr/bin/env bash
# Session 26's second H200 call: burst against sustained timing. Build: GENCODE=sm_90a
# scripts/build_for_gpu.sh, TUS=qmv_wide scripts/build_qmv_variant.sh wt "-DEXACTQ_WIDE_PACK_TILES=1",
# ALL=1 scripts/pack_variants.sh; run with carry [".out/bin"]. Under the 50 ms clock and power trace,
# the sections named in SECTIONS (default: all, in this order):
# burst:      the bench as the records time it (a burst of launches per point) on Llama's head,
#             28672x8192 and Gemma's head, all four kernels at M = SUSTAIN_MS (default 1,4,8,16);
# sustained:  the same points with --sustain 2 (each point's launches run untimed for 2 s first:
#             the clocks and the power limiter as continuous decoding holds them);
# overlapped: qmv at M = 1 with overlapped launches, sustained;
# prefetch:   sustained, on the heads, qmv at M = 1 with its L2 prefetch (the default there) and
#             without it (fewer instructions per round, less power?), as A B A;
# wide_tests: main's qmv_wide tests (scripts/gpu_logs.sh's filter), after qmv_wide's default
#             became wt's (only with SECTIONS naming it);
# wide_tiles: qmv_wide at M = 6-16 (several tiles of V vectors per launch), main against wt
#             (blocks of whole tasks where the tasks fill fewer warps than fit, so that the tiles
#             share the SMs), A B A, and wt's qmv_wide against the CPU mirror (ran in call 4;
#             since a05ea6a main packs the tiles too, so wt is main).
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session26b
start_clock_sampler
shapes=128256x4096,28672x8192,262144x3840
ms=${SUSTAIN_MS:-1,4,8,16}
common=(bench --backend cuda --shapes "$shapes" --bits 4 --group 64 --dtype bf16 --repeats 20)
summary() { awk '$4 ~ /^qmv/ && $5 ~ /^[0-9]+$/ {printf "%s %s M=%s %s us %s; ", $1, $4, $5, $6, $8} END {print ""}' "$1"; }

burst() {
  timeout 120 "$bin/exactq" "${common[@]}" --m "$ms" --kernels qmv,qmv_streamed,qmv_wide,qmv_mma \
    --json "$out/burst.json" --markdown "$out/burst.md" >"$out/burst.log" 2>&1
  echo "burst: exit $? (${SECONDS}s)"; grep "ceiling" "$out/burst.log"; summary "$out/burst.log"
}
sustained() {
  timeout $((${CALL_BUDGET:-570} - SECONDS - 20)) "$bin/exactq" "${common[@]}" --m "$ms" \
    --kernels qmv,qmv_streamed,qmv_wide,qmv_mma --sustain 2 \
    --json "$out/sustained.json" --markdown "$out/sustained.md" >"$out/sustained.log" 2>&1
  echo "sustained: exit $? (${SECONDS}s)"; grep "ceiling" "$out/sustained.log"; summary "$out/sustained.log"
}
overlapped() {
  time_left 40 || { echo "skipped overlapped (${SECONDS}s)"; return; }
  timeout 35 "$bin/exactq" "${common[@]}" --m 1 --kernels qmv --sustain 2 --overlap-launch \
    --json "$out/overlapped.json" --markdown "$out/overlapped.md" >"$out/overlapped.log" 2>&1
  echo "overlapped sustained: exit $? (${SECONDS}s)"; summary "$out/overlapped.log"
}
prefetch() {
  time_left 45 || { echo "skipped prefetch (${SECONDS}s)"; return; }
  timeout 40 "$bin/exactq" bench --backend cuda --shapes 128256x4096,262144x3840 --bits 4 --group 64 --dtype bf16 \
    --repeats 20 --m 1 --kernels qmv --sustain 2 --sweep-qmv-tuning=-1:-1,0:-1,-1:-1 \
    --json "$out/prefetch.json" >"$out/prefetch.log" 2>&1
  echo "prefetch A/B sustained: exit $? (${SECONDS}s)"; grep -E "^[0-9]+x[0-9]+ +[0-9]+ +[0-9]+ qmv" "$out/prefetch.log"
}
wide_tiles() {
  local pass=0 exe name
  for exe in "$bin/exactq" "$bin/exactq-wt" "$bin/exactq"; do
    pass=$((pass + 1))
    time_left 40 || { echo "skipped wide tiles $(basename "$exe") (${SECONDS}s)"; continue; }
    name=$(basename "$exe")_$pass
    timeout 35 "$exe" bench --backend cuda --shapes 4096x14336,4096x3840,17408x5120,28672x8192 --bits 4 --group 64 \
      --dtype bf16 --repeats 20 --m 6,8,12,16 --kernels qmv_wide --json "$out/wide_tiles_$name.json" \
      >"$out/wide_tiles_$name.log" 2>&1
    echo "$name: $(awk '$4 == "qmv_wide" {printf "%s M=%s %s; ", $1, $5, $6}' "$out/wide_tiles_$name.log")"
  done
  time_left 25 || { echo "skipped parity wt (${SECONDS}s)"; return; }
  timeout 20 "$bin/exactq-wt" parity --backend cuda --against cpu --kernels qmv,qmv_wide --n 4099 --k 3840 --bits 4 \
    --group 64 --dtype bf16 --m-max 20 --seeds 1 >"$out/parity_wt.log" 2>&1
  echo "parity wt: exit $? (${SECONDS}s)"
}

wide_tests() { time_left 60 && record_gtest wide_tests 50 "$bin/exactq_cuda_tests" "$wide_test_filter"; }

for section in ${SECTIONS:-burst sustained overlapped prefetch wide_tiles}; do
  mark "$section"
  "$section"
done
mark end
echo "(${SECONDS}s elapsed)"
