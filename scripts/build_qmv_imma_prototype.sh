#!/usr/bin/env bash
# Builds bench/prototypes/qmv_imma_prototype.cu (a measurement prototype, session 26) against the
# library of build-dev (GENCODE=sm_90a scripts/build_for_gpu.sh builds it) into .out/bin as
# qmv_imma_prototype.xz, which scripts/gpu_unpack.sh unpacks on the GPU machine. Run there:
# .out/bin/qmv_imma_prototype [N K]. ptxas's report of the kernel: .out/qmv_imma_ptxas.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
ninja -C build-dev exactq
mkdir -p .out/bin
rm -f .out/bin/qmv_imma_prototype .out/bin/qmv_imma_prototype.xz
nvcc -O3 -std=c++20 -gencode arch=compute_90a,code=sm_90a --fmad=false -ftz=false -prec-div=true -prec-sqrt=true \
  --expt-relaxed-constexpr -I include -I src -I bench/prototypes -Xptxas -v \
  -o .out/bin/qmv_imma_prototype bench/prototypes/qmv_imma_prototype.cu \
  build-dev/src/cuda/libexactq_cuda.a build-dev/libexactq.a -Xcompiler -static-libstdc++,-static-libgcc \
  2>.out/qmv_imma_ptxas.txt
grep -A2 "qmv_imma_kernel" .out/qmv_imma_ptxas.txt | grep -E "registers|spill" || true
strip .out/bin/qmv_imma_prototype
xz -T0 -6 .out/bin/qmv_imma_prototype
ls -la .out/bin
