#!/usr/bin/env bash
# Set up, build, and run the whole test suite (CUDA tests skip, with a message, without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)"
