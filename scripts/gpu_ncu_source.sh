#!/usr/bin/env bash
# Executed count of every SASS instruction of one launch (ncu's SourceCounters section), summed
# by opcode, so instruction counts per weight can be attributed with what actually ran (a static
# histogram, scripts/sass_loop.py, also counts branches that rarely run).
# Written in session 6 and not yet run: if ncu's CSV columns differ, the raw page is kept.
# Usage: scripts/gpu_ncu_source.sh NAME KERNEL_REGEX LAUNCH_SKIP COMMAND...
#   writes $OUT/ncu_source_NAME.csv (the source page, SASS view) and prints the opcode summary.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
out=${OUT:-/tmp/exactq-out}
mkdir -p "$out"
name=$1 regex=$2 skip=$3
shift 3
report=/tmp/ncu_source_$name
ncu --clock-control none --section SourceCounters --kernel-name "regex:$regex" --launch-skip "$skip" \
  --launch-count 1 -f -o "$report" "$@" >"$out/ncu_source_$name.log" 2>&1
echo "== $name (ncu exit $?)"
ncu --import "$report.ncu-rep" --page source --csv --print-source sass >"$out/ncu_source_$name.csv" 2>&1
python3 - "$out/ncu_source_$name.csv" <<'PY'
import collections, csv, re, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
head = next((i for i, r in enumerate(rows) if any("Instructions Executed" in c for c in r)), None)
if head is None:
    print("no 'Instructions Executed' column; see the CSV"); sys.exit(0)
cols = rows[head]
src = next(i for i, c in enumerate(cols) if c.strip() in ("Source", "# Source", "SASS"))
ex = next(i for i, c in enumerate(cols) if c.strip() == "Instructions Executed")
by_op, total = collections.Counter(), 0
for r in rows[head + 1:]:
    if len(r) <= max(src, ex): continue
    try: n = int(float(r[ex].replace(",", "") or 0))
    except ValueError: continue
    m = re.match(r"\s*(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", r[src])
    if m: by_op[m.group(2)] += n; total += n
print(f"warp-instructions executed: {total:,}")
for op, n in by_op.most_common(30): print(f"  {op:10s} {n:14,d} {100 * n / max(total, 1):5.1f} %")
PY
