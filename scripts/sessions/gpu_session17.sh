#!/usr/bin/env bash
# Session 17, first device call: 4-bit qmv with K fixed at compile time (K = 3840, 4096, 8192 at
# group 64: every round unrolled, loads at immediate offsets) against the run-time loop
# (exactq-nofixed, -DEXACTQ_QMV_FIXED_K=0), and with 32-bit parameter indices instead of 64-bit
# bases (exactq-idx). Bytes first (CUDA == CPU mirror, shapes with several trips so that the fixed
# trips run, with the last trip split and not), then qmv at M = 1 three times, then the SASS.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session17
for exe in "${exes[@]}"; do
  name=$(basename "$exe")
  fails=0
  for k in 3840 4096 8192; do
    for dtype in bf16 f16 f32; do
      for split in 1 0; do
        "$exe" parity --backend cuda --against cpu --kernels qmv,qmv_streamed --n 9001 --k "$k" --bits 4 --group 64 \
          --dtype "$dtype" --m-max 3 --seeds 1 --qmv-split-last-trip "$split" >>"$out/parity_$name.log" 2>&1
        rc=$?
        [[ $rc == 0 ]] || { fails=$((fails + 1)); echo "parity $name K=$k $dtype split=$split: exit $rc"; }
      done
    done
  done
  "$exe" parity --backend cuda --against cpu --kernels qmv --n 16896 --k 3840 --bits 4 --group 64 --dtype bf16 \
    --m-max 2 --seeds 2 --overlap-launch --qmv-l2-prefetch-rounds 3 >>"$out/parity_$name.log" 2>&1 || { fails=$((fails + 1)); echo "parity $name overlap: fail"; }
  echo "parity $name: $fails failures; $(grep -c PASS "$out/parity_$name.log") PASS lines"
done
ab_qmv_m1 3 28672x8192,262144x3840,128256x4096,15360x3840,14336x4096,4096x4096 "${exes[@]}"
for exe in "${exes[@]}"; do
  name=$(basename "$exe")
  cuobjdump -sass "$exe" >"$out/all_sass.txt" 2>/dev/null
  python3 - "$out/all_sass.txt" "$out" "$name" <<'PY'
import collections, re, sys
text, out, name = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
for block in text.split("Function : ")[1:]:
    fn = block.split("\n", 1)[0].strip()
    m = re.match(r"_ZN6exactq11cuda_detail17qmv_family_kernelILi4ELi1ELi4ELi2E(.*)EEvNS0_9QmvParamsE", fn)
    if not m:
        continue
    tag = m.group(1) or "runtime"
    open(f"{out}/sass_{name}_{tag}.txt", "w").write(block)
    ops = collections.Counter(re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", block))
    print(name, tag, "instructions", sum(ops.values()), "STL", ops["STL"], "LDL", ops["LDL"], "LDG", ops["LDG"], "IMAD", ops["IMAD"], "BRA", ops["BRA"])
PY
  rm -f "$out/all_sass.txt"
done
