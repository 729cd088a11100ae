#!/usr/bin/env bash
# Fuzzes the checkpoint and tokenizer parsers: builds the libFuzzer targets of tests/fuzz/ with Debian's clang
# (-fsanitize=fuzzer,address,undefined) into build-fuzz/ and runs each for a bounded time, from a
# copy of its committed seed corpus. Fails on any crash, leak, timeout or sanitizer report (a
# sanitizer aborts the process: no report is recovered from).
#   FUZZ_SECONDS  seconds per target (default 60)
#   FUZZ_JOBS     parallel fuzzing processes per target (default 1)
# The targets run side by side, one per core.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-1}
cxx=${FUZZ_CXX:-clang++}
out=build-fuzz
mkdir -p "$out/obj"

common=(-std=c++20 -O1 -g -fno-omit-frame-pointer -DFMT_HEADER_ONLY -Iinclude -Isrc
        -fsanitize=address,undefined -fno-sanitize-recover=all)
# The parts of src/model the parsers reach: header, config, quantization entry, module list, tokenizer.
library=(src/model/text.cpp src/model/safetensors.cpp src/model/config.cpp src/model/quant_config.cpp
         src/model/layout.cpp
         src/model/tokenizer.cpp src/model/tokenizer_json.cpp src/model/tokenizer_bpe.cpp
         src/model/tokenizer_pipeline.cpp src/model/tokenizer_decoder.cpp src/model/tokenizer_added.cpp src/model/tokenizer_regex.cpp
         src/model/tokenizer_text.cpp src/model/tokenizer_normalize.cpp)
objects=()
for source in "${library[@]}"; do
  object="$out/obj/$(basename "${source%.cpp}").o"
  "$cxx" "${common[@]}" -fsanitize=fuzzer-no-link -c "$source" -o "$object" &
  objects+=("$object")
done
wait

targets=(safetensors config tokenizer)
for target in "${targets[@]}"; do
  "$cxx" "${common[@]}" -fsanitize=fuzzer "tests/fuzz/fuzz_$target.cpp" "${objects[@]}" $(pkg-config --libs libpcre2-8 libutf8proc) \
    -o "$out/fuzz_$target" &
done
wait

# One target's run; its verdict goes to $out/fuzz_$target.verdict. The targets run side by side,
# as many at once as there are cores: each still gets its seconds of a whole core.
fuzz_one() {
  local target=$1 corpus="$out/corpus-$1"
  rm -rf "$corpus" "$out/run-$target" && mkdir -p "$corpus" "$out/run-$target"
  cp tests/fuzz/corpus/$target/* "$corpus"/
  echo "exactq fuzz: $target for ${seconds} s"
  # Each target in its own directory: libFuzzer's job logs (fuzz-N.log) have fixed names.
  # -timeout: one input taking this long is a finding; -rss_limit_mb: so is a blow-up in memory.
  if ! (cd "$out/run-$target" && ASAN_OPTIONS=detect_leaks=1 "../fuzz_$target" -max_total_time="$seconds" -timeout=10 \
          -rss_limit_mb=2048 -max_len=65536 -dict="../../tests/fuzz/$target.dict" -jobs="$jobs" -workers="$jobs" \
          -artifact_prefix=../ -print_final_stats=1 "../corpus-$target" > "../fuzz_$target.log" 2>&1); then
    echo failed > "$out/fuzz_$target.verdict"
  else
    echo clean > "$out/fuzz_$target.verdict"
  fi
}
cores=$(nproc)
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$cores" ]; do wait -n || true; done
  fuzz_one "$target" &
done
wait

status=0
for target in "${targets[@]}"; do
  if [ "$(cat "$out/fuzz_$target.verdict" 2>/dev/null)" != clean ]; then
    echo "exactq fuzz: $target FAILED (build-fuzz/fuzz_$target.log; the input is saved as build-fuzz/crash-*)"
    tail -n 40 "$out/fuzz_$target.log"
    status=1
  else
    grep -E "^(stat::number_of_executed_units|Done)" "$out/fuzz_$target.log" | tail -n 2 || true
    echo "exactq fuzz: $target clean"
  fi
done
exit $status
