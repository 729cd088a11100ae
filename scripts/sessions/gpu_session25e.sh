#!/usr/bin/env bash
# Session 25's fallback where a call for the H200 lands on an H100 (same build as
# gpu_session25c.sh). 28672x8192 is the one large shape where qmv at M = 1 stays under 90 % of the
# ceiling on the H100 (89.2-89.5 %, the size-matched read 97.5 %):
# 1. held runs under the power trace: main, e1 (no dot) and e2 (x's digits not read from shared
#    memory; both compute wrong bytes on purpose: timed and traced only) on 28672x8192. Does the
#    dot cost time there, where on the heads it costs none?
# 2. qmv at M = 1 with overlapped launches (--overlap-launch) on the three large shapes, main only.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session25e
start_clock_sampler
mark start
held() {
  local name=$1 exe=$2
  shift 2
  time_left 40 || { echo "skipped held $name (${SECONDS}s)"; return; }
  mark "$name start"
  timeout 35 "$exe" bench --backend cuda --bits 4 --group 64 --dtype bf16 "$@" \
    --json "$out/held_$name.json" >"$out/held_$name.log" 2>&1
  mark "$name end"
  echo "held $name: $(grep -E 'streaming read of the same' "$out/held_$name.log" | sed -E 's/.*: //') | $(awk '$5 ~ /^[0-9]+$/ {printf "%s M=%s %s us %s; ", $4, $5, $6, $8}' "$out/held_$name.log") (${SECONDS}s)"
}
for e in exactq exactq-e1 exactq-e2; do
  held "big_$e" "$bin/$e" --shapes 28672x8192 --m 1 --kernels qmv --repeats 6000
done
mark overlapped
held overlapped "$bin/exactq" --shapes 28672x8192,128256x4096,262144x3840 --m 1 --kernels qmv --repeats 20 --overlap-launch
mark end
echo "(${SECONDS}s elapsed)"
