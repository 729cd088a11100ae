#!/usr/bin/env bash
# Session 14, last call: the last-trip split with its facts computed once, against the build of
# call 1-2 (.out/bin/exactq-base) in the same call, then the record run (scripts/gpu_final.sh).
set -uo pipefail
bin=.out/bin
"$(dirname "$0")/../gpu_unpack.sh"
final=${OUT:-/tmp/exactq-out}
mkdir -p "$final"
ab=$(mktemp -d)
shapes=262144x3840,128256x4096,28672x8192,17408x5120,15360x3840
"$bin/exactq" bench --backend cuda --shapes $shapes --m 1 --kernels qmv --bits 4 --group 64 --dtype bf16 --repeats 40 \
  --sweep-qmv-tuning -1:-1,-1:0 --json "$ab/ab_new.json" >"$ab/ab_new.log" 2>&1
"$bin/exactq-base" bench --backend cuda --shapes $shapes --m 1 --kernels qmv --bits 4 --group 64 --dtype bf16 --repeats 40 \
  --sweep-qmv-l2-prefetch 0:0,-1:-1 --json "$ab/ab_base.json" >"$ab/ab_base.log" 2>&1
echo "== A/B $(grep ceiling "$ab/ab_new.log")"
awk '$4=="qmv" && $5==1 {printf "new  %-12s %7s %6s %s\n", $1, $6, $8, substr($0, index($0, "prefetch"))}' "$ab/ab_new.log"
awk '$4=="qmv" && $5==1 {printf "base %-12s %7s %6s %s\n", $1, $6, $8, substr($0, index($0, "prefetch"))}' "$ab/ab_base.log"
tar czf "$final/ab.tgz" -C "$ab" .
rm -f "$bin/exactq-base"
BENCH_M=${BENCH_M:-1,2,4,8,16} "$(dirname "$0")/../gpu_final.sh"
# Racecheck on the split path (a partial last trip split over warps, parked values in shared memory).
export PATH=/usr/local/cuda/bin:$PATH
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 "$bin/exactq" parity --backend cuda --kernels qmv \
  --n 11651 --k 4416 --bits 4 --group 64 --dtype bf16 --m-max 2 --seeds 1 >"$final/racecheck_split.log" 2>&1
echo "racecheck (split last trip, 11651x4416): exit $? $(grep -E 'RACECHECK SUMMARY' "$final/racecheck_split.log" | tail -1)"
