#!/usr/bin/env bash
# Configures and builds exactq into build/ (CUDA too when nvcc is found). Where no NVIDIA GPU is
# visible the CUDA kernels are compiled to PTX alone: they still compile, link and are tested for
# building, and nothing here could run their machine code (a GPU would compile the PTX at load).
# That saves about a quarter of the CUDA compile on CI's GPU-less machine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
gencode=()
if ! nvidia-smi -L >/dev/null 2>&1; then
  gencode=(-DEXACTQ_CUDA_GENCODE=-gencode=arch=compute_90,code=compute_90)
else
  gencode=(-UEXACTQ_CUDA_GENCODE)
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${gencode[@]}" >/dev/null
ninja -C build -j"$(nproc)"
