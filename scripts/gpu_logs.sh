# Sourced by the device-call scripts (`source scripts/gpu_logs.sh NAME`): unpacks .out/bin, sets
# bin (the binaries), final ($OUT, what comes back), out (a scratch folder, archived as
# $final/NAME.tgz on exit: the device tool returns at most eight files) and PATH for the CUDA tools.
bin=.out/bin
"$(dirname "${BASH_SOURCE[0]}")/gpu_unpack.sh"
final=${OUT:-/tmp/exactq-out}
out=$(mktemp -d)
mkdir -p "$final"
# shellcheck disable=SC2064  # the archive's name is fixed now
trap "tar czf '$final/$1.tgz' -C '$out' ." EXIT
export PATH=/usr/local/cuda/bin:$PATH
