#!/usr/bin/env bash
# Builds a measurement prototype that links the library, bench/prototypes/NAME.cu, against
# build-dev's library (GENCODE=sm_90a scripts/build_for_gpu.sh builds it), with the library's
# floating-point flags, into .out/bin/NAME.xz, which scripts/gpu_unpack.sh unpacks on the GPU
# machine; ptxas's report goes to .out/NAME_ptxas.txt. Prototypes built this way:
# data_pattern_power, qmv_imma_prototype. Usage: scripts/build_prototype.sh NAME
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: scripts/build_prototype.sh NAME (bench/prototypes/NAME.cu)}
[[ -f bench/prototypes/$name.cu ]] || { echo "no bench/prototypes/$name.cu" >&2; exit 2; }
export PATH=/usr/local/cuda/bin:$PATH
ninja -C build-dev exactq
mkdir -p .out/bin
rm -f ".out/bin/$name" ".out/bin/$name.xz"
nvcc -O3 -std=c++20 -gencode arch=compute_90a,code=sm_90a --fmad=false -ftz=false -prec-div=true -prec-sqrt=true \
  --expt-relaxed-constexpr -I include -I src -I bench/prototypes -Xptxas -v \
  -o ".out/bin/$name" "bench/prototypes/$name.cu" \
  build-dev/src/cuda/libexactq_cuda.a build-dev/libexactq.a -Xcompiler -static-libstdc++,-static-libgcc \
  2>".out/${name}_ptxas.txt"
grep -E "registers|spill" ".out/${name}_ptxas.txt" | grep -v "0 bytes spill" || true
strip ".out/bin/$name"
xz -T0 -6 ".out/bin/$name"
ls -la .out/bin
