#!/usr/bin/env bash
# Builds a tuning variant of the CLI (sm_90a only, to keep it small) as .out/bin/exactq-NAME.xz
# (stripped and compressed, as scripts/build_for_gpu.sh does; scripts/gpu_unpack.sh unpacks it),
# so one GPU call can benchmark several -D knob settings side by side.
# Usage: scripts/build_variant.sh NAME "-DKNOB=VALUE ..."
set -euo pipefail
cd "$(dirname "$0")/.."
name=$1
flags=$2
cmake -S . -B "build-variant-$name" -G Ninja -DEXACTQ_TESTS=OFF \
  -DEXACTQ_CUDA_GENCODE="-gencode=arch=compute_90a,code=sm_90a" -DEXACTQ_CUDA_EXPERIMENT_FLAGS="$flags" >/dev/null
ninja -C "build-variant-$name" exactq_cli
mkdir -p .out/bin
cp "build-variant-$name/exactq" ".out/bin/exactq-$name"
strip ".out/bin/exactq-$name"
xz -T0 -6 -f ".out/bin/exactq-$name"
ls -la ".out/bin/exactq-$name.xz"
