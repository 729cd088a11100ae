#!/usr/bin/env bash
# Session 16, the record run on the final build (qmv's merged butterflies): scripts/gpu_final.sh
# (tests, parity, sanitizers, every kernel on every preset at M = 1, 4, 16, the other widths,
# overlapped launches, PyTorch anchors), racecheck on split last trips (4 rows at 4 bits, 2 rows
# at 5 bits: both butterfly shapes), then the merged butterflies in qmv_streamed too
# (exactq-scatter2, -DEXACTQ_QMV_SCATTER_BUTTERFLY=2): its bytes, and M = 2, 4, 8 against main.
set -uo pipefail
BENCH_M=${BENCH_M:-1,4,16} "$(dirname "$0")/../gpu_final.sh"
export PATH=/usr/local/cuda/bin:$PATH
final=$(mktemp -d)  # the extra logs, archived as $OUT/session16c.tgz (the device returns at most eight files)
trap 'tar czf "${OUT:-/tmp/exactq-out}/session16c.tgz" -C "$final" .' EXIT
for spec in "4 28672 4096" "5 11651 4416"; do
  read -r b n k <<<"$spec"
  timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 .out/bin/exactq parity --backend cuda --kernels qmv \
    --n "$n" --k "$k" --bits "$b" --group 64 --dtype bf16 --m-max 2 --seeds 1 >"$final/racecheck_split_$b.log" 2>&1
  echo "racecheck (split last trip, $b-bit ${n}x$k): exit $? $(grep -E 'RACECHECK SUMMARY' "$final/racecheck_split_$b.log" | tail -1)"
done
v=.out/bin/exactq-scatter2
[[ -x $v ]] || exit 0
log=$final/scatter2.log
: >"$log"
for shape in "11651 4416 4 64 bf16" "5003 3840 5 32 f16" "28672 4096 8 128 f32" "7001 3840 2 64 bf16"; do
  read -r n k b gr dt <<<"$shape"
  "$v" parity --backend cuda --against cpu --kernels qmv,qmv_streamed,qmv_wide --n "$n" --k "$k" --bits "$b" --group "$gr" \
    --dtype "$dt" --m-max 9 --seeds 1 >>"$log" 2>&1
  echo "scatter2 parity ${n}x$k b$b: exit $?"
done
for pass in 1 2; do
  for exe in .out/bin/exactq "$v"; do
    "$exe" bench --backend cuda --shapes 28672x8192,262144x3840,15360x3840 --m 2,4,8 --kernels qmv_streamed --bits 4 \
      --group 64 --dtype bf16 --repeats 20 >"$final/streamed_$(basename "$exe")_$pass.log" 2>&1
    printf '%-16s %s: %s\n' "$(basename "$exe")" "$pass" \
      "$(awk '$4=="qmv_streamed" {printf "%s M=%s %s; ", $1, $5, $6}' "$final/streamed_$(basename "$exe")_$pass.log")"
  done
done
