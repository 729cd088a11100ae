#!/usr/bin/env bash
# The CPU test suite built with AddressSanitizer and UndefinedBehaviorSanitizer (EXACTQ_SANITIZE)
# into build-sanitize/: the library, the tests and the `exactq` binary that the CLI tests spawn.
# Every report ends its process with a failure (no recovery; an abort, so that a CLI test sees a
# signal rather than an exit status it might expect), which fails the test; leaks are reported
# at exit. Extra arguments go to ctest (e.g. -R Format).
#
# Left out here (the plain run has them all): the tests that decode hundreds of tokens with the
# trained pair or a made checkpoint through the speculative loop, in the CLI (the main job among
# them), the server or the engine. They run the same ops, parsers, server and CLI paths as the
# tests kept, many times over, and took a third of the sanitized run.
#
# Built with clang (installed for scripts/fuzz.sh): it compiles the instrumented sources about a
# third faster than GCC (the same 67 translation units: 283 against 430 CPU seconds), and this
# build is the longest part of the test command.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DEXACTQ_CUDA=OFF -DEXACTQ_SANITIZE=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
ninja -C build-sanitize -j"$(nproc)"
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1
long='^(TrainedPair\..*|Cli\.DemoComparesClassicAndSpeculativeDecode|CliServeLoad\.WithTheDraftModelTheResponsesAreTheClassicSoloRuns|CliBenchSpec\.(MixedPromptLengthsUpToBlock16EveryExactArmIdentical|PromptFileWithTheTrainedPair)|Speculative\.(OtherDraftModelLookupAndReplayEqualClassicWithRejections|AdaptiveWidthChangesTheRoundsNotTheOutput))$'
ctest --test-dir build-sanitize --output-on-failure -j"$(nproc)" -E "$long" "$@"
