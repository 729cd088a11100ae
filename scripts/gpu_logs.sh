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
trap "stop_clock_sampler; tar czf '$final/$1.tgz' -C '$out' ." EXIT
export PATH=/usr/local/cuda/bin:$PATH
exes=("$bin/exactq")
for e in "$bin"/exactq-*; do [[ -x $e ]] && exes+=("$e"); done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"

# The SM and memory clocks, power and the reasons the clocks are held down, every 50 ms into
# $out/clocks.csv until the script ends; `mark LABEL` writes the time and LABEL to $out/marks.txt,
# so a phase's samples can be picked out. Does the SM clock stay at its maximum under the bench's
# launches? Usage: start_clock_sampler; mark "phase"
clock_sampler=
start_clock_sampler() {
  # power.draw is averaged over about a second; power.draw.instant (newer drivers) is not.
  local fields=timestamp,clocks.sm,clocks.mem,power.draw,power.draw.instant,temperature.gpu,clocks_event_reasons.active
  nvidia-smi --query-gpu="$fields" --format=csv,noheader -c 1 >/dev/null 2>&1 ||
    fields=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active
  nvidia-smi --query-gpu="$fields" --format=csv,noheader -c 1 >/dev/null 2>&1 ||
    fields=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active
  nvidia-smi --query-gpu="$fields" --format=csv -lms 50 >"$out/clocks.csv" 2>&1 &
  clock_sampler=$!
}
stop_clock_sampler() { [[ -n $clock_sampler ]] && kill "$clock_sampler" 2>/dev/null; clock_sampler=; }
mark() { echo "$(date '+%Y/%m/%d %H:%M:%S.%3N') $*" >>"$out/marks.txt"; }

# REQUIRE_GPU=H200 (a substring of the name): stop at once on any other card, so a call that lands
# on another kind costs only its start.
if [[ -n ${REQUIRE_GPU:-} ]] && ! grep -q -- "$REQUIRE_GPU" "$out/gpu.txt"; then
  echo "not a $REQUIRE_GPU: stopping"
  exit 3
fi

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

# A held bench point (4-bit g64 bf16), for the clock and power trace: NAME and EXE, then bench
# options (a large --repeats keeps the kernel busy for seconds); marked in marks.txt, logs
# $out/held_NAME.*, one summary line (the size-matched read, then each row's µs and % of the
# ceiling). Each is skipped unless HELD_LIMIT (default 60 s) + 10 s are left.
# Usage: held NAME EXE --shapes ... --m ... --kernels ... --repeats ...
held() {
  local name=$1 exe=$2 limit=${HELD_LIMIT:-60}
  shift 2
  time_left $((limit + 10)) || { echo "skipped held $name (${SECONDS}s)"; return; }
  mark "$name start"
  timeout "$limit" "$exe" bench --backend cuda --bits 4 --group 64 --dtype bf16 "$@" \
    --json "$out/held_$name.json" >"$out/held_$name.log" 2>&1
  mark "$name end"
  echo "held $name: $(grep -E 'streaming read of the same' "$out/held_$name.log" | sed -E 's/.*: //') | $(awk '$5 ~ /^[0-9]+$/ {printf "%s M=%s %s us %s; ", $4, $5, $6, $8}' "$out/held_$name.log") (${SECONDS}s)"
}

# The tests that run qmv_wide against the CPU mirror (gtest filter), for record_gtest.
wide_test_filter='CudaQmv.WideEqualsCpuMirrorOverSeveralTripsAndTiles:CudaQmv.EqualsCpuMirrorForEveryFormat:CudaQmv.EqualsCpuMirrorOnShapes:CudaQmv.NonFiniteInputsEqualCpuMirror:CudaQmv.ExtremeActivationRangesEqualCpuMirror:CudaQmv.WidthInvariantWithNegativeControl'

# A gtest binary under a timeout, log $out/LOG.log, one summary line and its failures.
# Usage: record_gtest LOG TIMEOUT EXE [GTEST_FILTER]
record_gtest() {
  local log=$1 limit=$2 exe=$3 filter=${4:-*}
  timeout "$limit" "$exe" --gtest_filter="$filter" >"$out/$log.log" 2>&1
  echo "$log: rc $? $(grep -E '^\[  (PASSED|FAILED)' "$out/$log.log" | tr '\n' ' ') ok $(grep -c '^\[       OK' "$out/$log.log") (${SECONDS}s)"
  grep -E "^\[  FAILED|Failure" "$out/$log.log" | head -20
}

# memcheck and racecheck on EXE's tests matching FILTER, each where TIMEOUT + 5 s is left; logs
# $out/sanitizer_PREFIXTOOL.log. Usage: sanitize TIMEOUT EXE FILTER [PREFIX]
sanitize() {
  local limit=$1 exe=$2 filter=$3 prefix=${4:-} tool
  for tool in memcheck racecheck; do
    time_left $((limit + 5)) || { echo "skipped $prefix$tool: ${SECONDS}s"; continue; }
    timeout "$limit" compute-sanitizer --tool "$tool" --error-exitcode 9 "$exe" --gtest_filter="$filter" \
      >"$out/sanitizer_$prefix$tool.log" 2>&1
    echo "$prefix$tool: rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$prefix$tool.log" | tail -1) (${SECONDS}s)"
  done
}

# The record: all four kernels of bin/exactq on every preset at M = 1-5, 8, 16, where 100 s are
# left; $out/bench.{log,json,md,svg}, then the ceiling, qmv at M = 1 and the recovered fractions.
record_bench() {
  time_left 100 || { echo "skipped the record bench: ${SECONDS}s"; return; }
  timeout 95 "$bin/exactq" bench --backend cuda --shapes gemma12b,llama3-8b,qwen27b,big --m 1-5,8,16 \
    --kernels qmv,qmv_streamed,qmv_wide,qmv_mma --bits 4 --group 64 --dtype bf16 --repeats 20 \
    --json "$out/bench.json" --markdown "$out/bench.md" --plot "$out/bench.svg" >"$out/bench.log" 2>&1
  echo "bench: exit $? (${SECONDS}s)"
  grep -E "read ceiling" "$out/bench.log"
  awk '$4=="qmv" && $5==1 {printf "%s %s %s; ", $1, $6, $8} END {print ""}' "$out/bench.log"
  awk '$4=="qmv_streamed" && $10!="-" && $10!="" {printf "%s M=%s %s; ", $1, $5, $10} END {print ""}' "$out/bench.log"
}

# qmv_wide at M = 1-5 (4-bit g64 bf16) on SHAPES, two passes over the given binaries where 30 s
# are left; logs $out/wide_NAME_PASS.*, one line of µs at M = 1..5 per shape and binary.
# Usage: ab_wide SHAPES EXE...
ab_wide() {
  local shapes=$1 pass exe name
  shift
  echo "== qmv_wide, M = 1-5 (us at M = 1..5 per shape)"
  for pass in 1 2; do
    for exe in "$@"; do
      time_left 30 || { echo "skipped $exe pass $pass (${SECONDS}s)"; continue; }
      name=$(basename "$exe")
      timeout 25 "$exe" bench --backend cuda --shapes "$shapes" --m 1-5 --kernels qmv_wide --bits 4 --group 64 \
        --dtype bf16 --repeats 20 --json "$out/wide_${name}_$pass.json" >"$out/wide_${name}_$pass.log" 2>&1
      printf '%-14s %s: %s\n' "$name" "$pass" "$(awk '$4=="qmv_wide" {a[$1]=a[$1] " " $6} END {for (s in a) printf "%s%s; ", s, a[s]}' "$out/wide_${name}_$pass.log")"
    done
  done
  echo "(${SECONDS}s elapsed)"
}
