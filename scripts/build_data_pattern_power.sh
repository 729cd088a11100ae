#!/usr/bin/env bash
# Builds bench/prototypes/data_pattern_power.cu (a measurement prototype, session 26) against the
# library of build-dev (scripts/build_for_gpu.sh with GENCODE=sm_90a builds it) and puts it in
# .out/bin as data_pattern_power.xz, which scripts/gpu_unpack.sh unpacks on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
ninja -C build-dev exactq
mkdir -p .out/bin
rm -f .out/bin/data_pattern_power .out/bin/data_pattern_power.xz
nvcc -O3 -std=c++20 -gencode arch=compute_90a,code=sm_90a -I include -I bench/prototypes \
  -o .out/bin/data_pattern_power bench/prototypes/data_pattern_power.cu \
  build-dev/src/cuda/libexactq_cuda.a build-dev/libexactq.a -Xcompiler -static-libstdc++,-static-libgcc
strip .out/bin/data_pattern_power
xz -T0 -6 .out/bin/data_pattern_power
ls -la .out/bin
