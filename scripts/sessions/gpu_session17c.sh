#!/usr/bin/env bash
# Session 17, third device call: does a long run of qmv lower the SM clock (power), which would
# explain why 262144 rows read 3 points lower than 128256 at the same K? nvidia-smi samples the SM
# clock, power and throttle reasons every 20 ms while qmv runs with 20 and with 200 timed launches
# per point; the same shapes with the fixed-K kernel (exactq-idx) and without (exactq-nofixed).
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session17c
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader -lms 20 >"$out/smi.csv" 2>&1 &
smi=$!
sleep 1
for exe in "${exes[@]:1}"; do
  name=$(basename "$exe")
  for repeats in 20 200; do
    echo "$(date +%T.%N) start $name $repeats" >>"$out/marks.txt"
    "$exe" bench --backend cuda --shapes 262144x4096,128256x4096,262144x3840 --m 1 --kernels qmv --bits 4 --group 64 \
      --dtype bf16 --repeats $repeats >"$out/bench_${name}_$repeats.log" 2>&1
    echo "$(date +%T.%N) end $name $repeats" >>"$out/marks.txt"
    echo "== $name repeats $repeats: $(awk '$4=="qmv" {printf "%s %s %s; ", $1, $6, $8}' "$out/bench_${name}_$repeats.log") $(grep -h "streaming read of" "$out/bench_${name}_$repeats.log" | awk '{printf "read %s %s %s; ", $1, $9, $13}')"
  done
done
sleep 0.5
kill $smi
python3 - "$out/smi.csv" <<'PY'
import collections, sys
rows = [l.split(", ") for l in open(sys.argv[1]) if l.count(",") >= 5]
busy = [r for r in rows if r[3].endswith("W") and float(r[3].split()[0]) > 150]
print("samples", len(rows), "busy (>150 W)", len(busy))
for key, idx in (("sm MHz", 1), ("power W", 3)):
    vals = sorted(float(r[idx].split()[0]) for r in busy)
    if vals:
        print(key, "min", vals[0], "median", vals[len(vals) // 2], "max", vals[-1])
print("reasons", collections.Counter(r[5].strip() for r in busy).most_common(6))
PY
