#!/usr/bin/env bash
# Set up, build, and run the whole test suite (CUDA tests skip, with a message, without a GPU),
# then the CPU tests again under AddressSanitizer and UndefinedBehaviorSanitizer
# (scripts/sanitize.sh, into build-sanitize/). Both runs happen whatever the first one gives; the
# exit status is non-zero when either failed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
status=0
ctest --test-dir build --output-on-failure -j"$(nproc)" || status=1
scripts/sanitize.sh || status=1
exit "$status"
