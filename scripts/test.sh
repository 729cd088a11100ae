#!/usr/bin/env bash
# Set up, build, and run the whole test suite (CUDA tests skip, with a message, without a GPU),
# then the CPU tests again under AddressSanitizer and UndefinedBehaviorSanitizer
# (scripts/sanitize.sh, into build-sanitize/), then a bounded fuzzing run of the checkpoint parsers
# (scripts/fuzz.sh, FUZZ_SECONDS per target). Every part runs whatever the others give; the exit
# status is non-zero when any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
status=0
ctest --test-dir build --output-on-failure -j"$(nproc)" || status=1
scripts/sanitize.sh || status=1
FUZZ_SECONDS=${FUZZ_SECONDS:-60} scripts/fuzz.sh || status=1
exit "$status"
