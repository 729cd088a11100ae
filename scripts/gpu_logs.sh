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

# A same-call A/B: qmv at M = 1 (4-bit g64 bf16, 20 timed launches) on SHAPES, PASSES times over
# the given binaries in turn; logs and JSON as $out/qmv_NAME_PASS.*, one summary line (shape, us,
# % of the ceiling) per binary and pass. Usage: ab_qmv_m1 PASSES SHAPES EXE...
ab_qmv_m1() {
  local passes=$1 shapes=$2 pass exe name
  shift 2
  for ((pass = 1; pass <= passes; pass++)); do
    for exe in "$@"; do
      name=$(basename "$exe")
      "$exe" bench --backend cuda --shapes "$shapes" --m 1 --kernels qmv --bits 4 --group 64 --dtype bf16 --repeats 20 \
        --json "$out/qmv_${name}_$pass.json" >"$out/qmv_${name}_$pass.log" 2>&1
      printf '%-16s %s: %s\n' "$name" "$pass" "$(awk '$4=="qmv" {printf "%s %s %s; ", $1, $6, $8}' "$out/qmv_${name}_$pass.log")"
    done
  done
}

# The same with overlapped launches (--overlap-launch), one pass: $out/ovl_NAME.*, one summary line
# per binary. Usage: ovl_qmv_m1 SHAPES EXE...
ovl_qmv_m1() {
  local shapes=$1 exe name
  shift
  for exe in "$@"; do
    name=$(basename "$exe")
    "$exe" bench --backend cuda --shapes "$shapes" --m 1 --kernels qmv --bits 4 --group 64 --dtype bf16 --repeats 20 \
      --overlap-launch --json "$out/ovl_$name.json" >"$out/ovl_$name.log" 2>&1
    printf '%-16s ovl: %s\n' "$name" "$(awk '$4=="qmv" {printf "%s %s %s; ", $1, $6, $8}' "$out/ovl_$name.log")"
  done
}

# A device call is killed at 600 s, and then the EXIT trap that archives $out does not run: a
# section that might not finish is skipped instead. Usage: time_left SECONDS || echo "skipped"
# (true while the script's elapsed time plus SECONDS stays under CALL_BUDGET, default 570).
time_left() { ((SECONDS + $1 < ${CALL_BUDGET:-570})); }

# The A/B section of qmv at M = 1 (sessions 19-21): the ten shapes (both heads, 28672x8192, the
# projections), two plain passes of ab_qmv_m1 over EXE..., one overlapped pass where the time
# allows, and the read ceilings of main's first pass. Usage: qmv_m1_section EXE...
qmv_m1_section() {
  local shapes=262144x3840,128256x4096,28672x8192,15360x3840,3840x15360,14336x4096,4096x14336,17408x5120,5120x17408,5120x5120
  echo "== qmv, M = 1"
  ab_qmv_m1 2 "$shapes" "$@"
  echo "(${SECONDS}s elapsed)"
  echo "== overlapped"
  if time_left 90; then ovl_qmv_m1 "$shapes" "$@"; else echo "skipped: ${SECONDS}s elapsed"; fi
  grep -h "ceiling" "$out"/qmv_exactq_1.log | head -3
}

# qmv of each given binary against the CPU mirror at 4 bits (qmv_wide against qmv: the negative
# control), on each ARGS string (--n, --k, --dtype, --group, --m-max), as time allows; logs as
# $out/parity_NAME.log. Usage: variant_parity "ARGS" ... -- EXE...
variant_parity() {
  local specs=() args exe name
  while [[ $1 != -- ]]; do specs+=("$1"); shift; done
  shift
  for args in "${specs[@]}"; do
    for exe in "$@"; do
      name=$(basename "$exe")
      time_left 35 || { echo "skipped parity $name $args: ${SECONDS}s elapsed"; continue; }
      # shellcheck disable=SC2086  # args is a list of options
      timeout 30 "$exe" parity --backend cuda --against cpu --kernels qmv,qmv_wide --bits 4 $args --seeds 1 \
        >>"$out/parity_$name.log" 2>&1
      echo "parity $name $args: exit $?"
    done
  done
}

# All four kernels of bin/exactq against the CPU mirror to M = 20, on each "BITS GROUP DTYPE N K",
# as time allows (qmv_mma, which has no f32 path, not at f32); log $out/parity.log.
# Usage: record_parity "BITS GROUP DTYPE N K" ...
record_parity() {
  local spec b g d n k kernels
  for spec in "$@"; do
    time_left 45 || { echo "skipped parity $spec"; continue; }
    read -r b g d n k <<<"$spec"
    kernels=qmv,qmv_streamed,qmv_wide,qmv_mma
    [[ $d == f32 ]] && kernels=qmv,qmv_streamed,qmv_wide
    timeout 40 "$bin/exactq" parity --backend cuda --against cpu --kernels "$kernels" --n "$n" \
      --k "$k" --bits "$b" --group "$g" --dtype "$d" --m-max 20 --seeds 1 >>"$out/parity.log" 2>&1
    echo "parity $spec: exit $? (${SECONDS}s)"
  done
}
