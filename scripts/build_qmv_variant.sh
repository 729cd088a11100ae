#!/usr/bin/env bash
# A tuning variant of the CLI in which only some translation units of src/cuda (TUS, default
# "qmv": the V = 1 kernels) are rebuilt with extra -D knobs, linked against build-dev's other
# objects (GENCODE=sm_90a scripts/build_for_gpu.sh first): a variant takes a minute or two instead
# of six. Writes .out/bin/exactq-NAME.xz (as scripts/build_variant.sh) and the ptxas report.
# Usage: [TUS="qmv qmv_mma_fragments"] scripts/build_qmv_variant.sh NAME "-DKNOB=VALUE ..."
set -euo pipefail
cd "$(dirname "$0")/.."
name=$1
flags=$2
dir=build-qmv-variant-$name
mkdir -p "$dir"
tus=${TUS:-qmv}
: >"$dir/ptxas.txt"
for tu in $tus; do
  # shellcheck disable=SC2086  # the flags are words
  /usr/local/cuda/bin/nvcc -I include -I src -O3 -DNDEBUG -Xcompiler=-fPIC -gencode=arch=compute_90a,code=sm_90a \
    --fmad=false -ftz=false -prec-div=true -prec-sqrt=true -lineinfo --expt-relaxed-constexpr -std=c++20 $flags \
    -Xptxas -v -c "src/cuda/$tu.cu" -o "$dir/$tu.cu.o" 2>>"$dir/ptxas.txt"
done
python3 scripts/ptxas_summary.py <"$dir/ptxas.txt" | grep -E "kernel<4, (1,|true)" || true
objs=()
for o in build-dev/src/cuda/CMakeFiles/exactq_cuda.dir/*.o; do
  b=$(basename "$o" .cu.o)
  [[ " $tus " == *" $b "* ]] && objs+=("$dir/$b.cu.o") || objs+=("$o")
done
rm -f "$dir/libexactq_cuda.a"
ar qc "$dir/libexactq_cuda.a" "${objs[@]}"
c++ -O3 -DNDEBUG -static-libstdc++ -static-libgcc build-dev/CMakeFiles/exactq_cli.dir/apps/*.o -o "$dir/exactq" \
  -L/usr/local/cuda/targets/x86_64-linux/lib build-dev/libexactq.a "$dir/libexactq_cuda.a" -lcudadevrt -lcudart_static \
  -lrt -lpthread -ldl
mkdir -p .out/bin
cp "$dir/exactq" ".out/bin/exactq-$name"
strip ".out/bin/exactq-$name"
xz -T0 -6 -f ".out/bin/exactq-$name"
ls -la ".out/bin/exactq-$name.xz"
