#!/usr/bin/env bash
# Session 20, call 3: qmv_streamed's widths. Call 2 (session20s, main) found V = 5 slower than
# V = 4 plus one qmv on every shape (it spills 200 bytes at two blocks per SM), V = 6-8 twice as slow
# per vector as V = 4 on Gemma's head (one block per SM, 31 trips per warp) but the fastest on the
# 33 MB projections, and x's staging repeated per block (at V = 4, K = 15360 is four tiles). The
# variants, qmv_streamed.cu alone rebuilt (qmv is main's):
#   sg     whole passes of Vmax, then one pass of the rest (not equal widths), and Vmax = 4 where
#          the V <= 4 kernels have 8 trips per warp or more (EXACTQ_STREAMED_WIDTHS=1);
#   sg5    sg, and V = 5 at one block per SM (EXACTQ_STREAMED_ONE_BLOCK_FROM=5);
#   sfs    x staged by stage_integers_fast in qmv_streamed only (EXACTQ_QMV_FAST_STAGING=1);
#   sg5fs  all three.
# Built: GENCODE=sm_90a scripts/build_for_gpu.sh, then for each NAME "FLAGS" above
# TUS=qmv_streamed scripts/build_qmv_variant.sh NAME "FLAGS", then scripts/pack_variants.sh.
set -uo pipefail
source "$(dirname "$0")/../gpu_logs.sh" session20c
shapes=3840x15360,15360x3840,28672x8192,262144x3840,128256x4096,5120x17408
for exe in "${exes[@]}"; do
  name=$(basename "$exe")
  kernels=qmv_streamed
  [[ $name == exactq ]] && kernels=qmv,qmv_streamed
  time_left 60 || { echo "skipped $name: ${SECONDS}s elapsed"; continue; }
  timeout 100 "$exe" bench --backend cuda --shapes "$shapes" --m 1-8,16 --kernels "$kernels" --bits 4 --group 64 \
    --dtype bf16 --repeats 20 --json "$out/streamed_$name.json" --markdown "$out/streamed_$name.md" >"$out/streamed_$name.log" 2>&1
  echo "$name: exit $?"
  grep -E "qmv_streamed +V=5" "$out/streamed_$name.log"
  for s in ${shapes//,/ }; do
    awk -v s="$s" '$1==s && ($4=="qmv_streamed" || $4=="qmv") {printf "%s%s=%s ", ($4=="qmv" ? "n" : ""), $5, $6}' "$out/streamed_$name.log"
    echo " ($s)"
  done
done
echo "== parity of the streamed variants against the CPU mirror (M to 17: every width and remainder)"
for exe in "${exes[@]:1}"; do
  name=$(basename "$exe")
  for args in "--n 9001 --k 3840 --dtype bf16 --bits 4" "--n 2001 --k 15360 --dtype f16 --bits 4" \
    "--n 1003 --k 4416 --dtype bf16 --bits 5" "--n 70001 --k 1024 --dtype f32 --bits 8"; do
    time_left 30 || { echo "skipped parity $name: ${SECONDS}s elapsed"; break; }
    timeout 60 "$exe" parity --backend cuda --against cpu --kernels qmv_streamed --group 64 $args --m-max 17 --seeds 1 \
      >>"$out/parity_$name.log" 2>&1
    echo "parity $name $args: exit $?"
  done
done
echo "(${SECONDS}s elapsed)"
