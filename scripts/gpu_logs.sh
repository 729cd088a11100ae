# Sourced by the device-call scripts (`source scripts/gpu_logs.sh NAME`): unpacks .out/bin, sets
# bin (the binaries), exes (bin/exactq, then every variant bin/exactq-*), final ($OUT, what comes
# back), out (a scratch folder, archived as $final/NAME.tgz on exit: the device tool returns at
# most eight files) and PATH for the CUDA tools, and records the GPU and its clocks in out/gpu.txt.
bin=.out/bin
"$(dirname "${BASH_SOURCE[0]}")/gpu_unpack.sh"
final=${OUT:-/tmp/exactq-out}
out=$(mktemp -d)
mkdir -p "$final"
# shellcheck disable=SC2064  # the archive's name is fixed now
trap "tar czf '$final/$1.tgz' -C '$out' ." EXIT
export PATH=/usr/local/cuda/bin:$PATH
exes=("$bin/exactq")
for e in "$bin"/exactq-*; do [[ -x $e ]] && exes+=("$e"); done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
