#!/usr/bin/env bash
# A tuning variant of the CLI in which only some translation units of src/cuda (TUS, default
# "qmv": the V = 1 kernels) are rebuilt with extra -D knobs, linked against build-dev's other
# objects (GENCODE=sm_90a scripts/build_for_gpu.sh first): a variant takes a minute or two instead
# of six. The compile and link commands are build-dev's own (ninja -t commands), so the flags are
# CMake's. Writes .out/bin/exactq-NAME.xz (as scripts/build_variant.sh) and the ptxas report.
# With TESTS=1 it also links the CUDA tests against the variant, as .out/bin/exactq_cuda_tests-NAME.xz
# (for compute-sanitizer on the variant's kernels).
# Usage: [TUS="qmv qmv_mma_fragments"] [TESTS=1] scripts/build_qmv_variant.sh NAME "-DKNOB=VALUE ..."
set -euo pipefail
cd "$(dirname "$0")/.."
name=$1
flags=$2
dev=build-dev
dir=$PWD/build-qmv-variant-$name
mkdir -p "$dir"
commands=$(ninja -C "$dev" -t commands exactq_cli)
: >"$dir/ptxas.txt"
for tu in ${TUS:-qmv}; do
  object=src/cuda/CMakeFiles/exactq_cuda.dir/$tu.cu.o
  compile=$(grep -F -- "-o $object" <<<"$commands" | grep -F nvcc)
  # Its own object and no dependency file, plus the knobs and ptxas's report.
  compile=${compile/-o $object/-o $dir/$tu.cu.o}
  compile=$(sed -E 's/ -MD -MT [^ ]+ -MF [^ ]+//' <<<"$compile")
  (cd "$dev" && eval "$compile $flags -Xptxas -v") 2>>"$dir/ptxas.txt"
done
python3 scripts/ptxas_summary.py <"$dir/ptxas.txt" | grep -E "kernel<4, (1,|true)" || true
objs=()
for o in "$dev"/src/cuda/CMakeFiles/exactq_cuda.dir/*.o; do
  b=$(basename "$o" .cu.o)
  [[ " ${TUS:-qmv} " == *" $b "* ]] && objs+=("$dir/$b.cu.o") || objs+=("$PWD/$o")
done
rm -f "$dir/libexactq_cuda.a"
ar qc "$dir/libexactq_cuda.a" "${objs[@]}"
link=$(grep -E -- " -o exactq " <<<"$commands")
link=${link/ -o exactq / -o $dir/exactq }
link=${link/src\/cuda\/libexactq_cuda.a/$dir/libexactq_cuda.a}
(cd "$dev" && eval "$link")
mkdir -p .out/bin
cp "$dir/exactq" ".out/bin/exactq-$name"
strip ".out/bin/exactq-$name"
xz -T0 -6 -f ".out/bin/exactq-$name"
ls -la ".out/bin/exactq-$name.xz"
if [[ ${TESTS:-0} == 1 ]]; then
  link=$(ninja -C "$dev" -t commands exactq_cuda_tests | grep -E -- " -o tests/exactq_cuda_tests ")
  link=${link/ -o tests\/exactq_cuda_tests / -o $dir/exactq_cuda_tests }
  link=${link/src\/cuda\/libexactq_cuda.a/$dir/libexactq_cuda.a}
  (cd "$dev" && eval "$link")
  cp "$dir/exactq_cuda_tests" ".out/bin/exactq_cuda_tests-$name"
  strip ".out/bin/exactq_cuda_tests-$name"
  xz -T0 -6 -f ".out/bin/exactq_cuda_tests-$name"
  ls -la ".out/bin/exactq_cuda_tests-$name.xz"
fi
