#!/usr/bin/env bash
# Builds the CUDA binaries here (sm_90a + sm_90) and puts them in .out/bin, the folder a GPU
# call carries (`carry: [".out/bin"]`, then scripts/gpu_final.sh there: the record run).
# The binaries are stripped and xz-compressed (two of them uncompressed pass the 64 MiB a call may
# carry): the GPU script unpacks them (scripts/gpu_unpack.sh). GENCODE=sm_90a builds the sm_90a
# code only (what the H200 runs), in half the compile time, into build-dev.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build-cuda
args=()
if [[ ${GENCODE:-} == sm_90a ]]; then
  dir=build-dev
  args=("-DEXACTQ_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a")
fi
cmake -S . -B "$dir" -G Ninja -DEXACTQ_TESTS=ON "${args[@]}" >/dev/null
ninja -C "$dir" exactq_cli exactq_cuda_tests
rm -f .out/bin/exactq .out/bin/exactq_cuda_tests .out/bin/exactq.xz .out/bin/exactq_cuda_tests.xz
mkdir -p .out/bin
cp "$dir/exactq" "$dir/tests/exactq_cuda_tests" .out/bin/
strip .out/bin/exactq .out/bin/exactq_cuda_tests
xz -T0 -6 .out/bin/exactq .out/bin/exactq_cuda_tests
git rev-parse HEAD >.out/bin/commit
git status --short --untracked-files=no >>.out/bin/commit
ls -la .out/bin
