#!/usr/bin/env bash
# Looks inside one kernel on the GPU machine: SASS instruction histogram and an ncu summary.
# Usage: scripts/gpu_profile.sh KERNEL_REGEX [exactq bench args...]
set -uo pipefail
out=${OUT:-/tmp/exactq-out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
regex=$1
shift
cuobjdump -sass .out/bin/exactq >"$out/sass.txt" 2>&1
python3 - "$out/sass.txt" "$regex" <<'PY'
import re, sys, collections
text = open(sys.argv[1]).read()
for block in re.split(r"\n\s*Function : ", text)[1:]:
    name = block.split("\n", 1)[0].strip()
    if not re.search(sys.argv[2], name):
        continue
    ops = collections.Counter(m.group(1).split(".")[0] for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", block))
    print(name, sum(ops.values()), "instructions:", ", ".join(f"{k} {v}" for k, v in ops.most_common(24)))
    open(sys.argv[1].replace("sass.txt", "sass_" + str(abs(hash(name)) % 1000) + ".txt"), "w").write(name + "\n" + block)
PY
rm -f "$out/sass.txt"
ncu --clock-control none --kernel-name "regex:$regex" --launch-count 1 \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis --section SchedulerStats --section InstructionStats --section SourceCounters \
  .out/bin/exactq bench --backend cuda --repeats 1 "$@" >"$out/ncu.txt" 2>&1
grep -E "Duration|Throughput|Registers|Achieved Occupancy|Theoretical Occupancy|Stall|Warp Cycles|Issued|Block Limit|Grid Size|Waves|Bandwidth|L2 Hit|Mem Busy|Max Bandwidth|Executed Ipc|ERR|rror" "$out/ncu.txt" | head -60
