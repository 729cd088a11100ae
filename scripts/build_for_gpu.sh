#!/usr/bin/env bash
# Builds the CUDA binaries here (sm_90a + sm_90) and puts them in .out/bin, the folder a GPU
# call carries (`carry: [".out/bin"]`, then scripts/gpu_final.sh there: the record run).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-cuda -G Ninja -DEXACTQ_TESTS=ON >/dev/null
ninja -C build-cuda exactq_cli exactq_cuda_tests
mkdir -p .out/bin
cp build-cuda/exactq build-cuda/tests/exactq_cuda_tests .out/bin/
ls -la .out/bin
