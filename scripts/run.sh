#!/usr/bin/env bash
# The main job on the embedded default: set up, build, then `exactq demo` on the backend present
# (CUDA where a GPU is usable, the CPU mirror otherwise). Extra arguments go to `exactq demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
exec build/exactq demo "$@"
