#!/usr/bin/env bash
# Installs what exactq needs from Debian's packages, once. Idempotent; no network use when all is there.
set -euo pipefail
# libasan8 and libubsan1 are the runtimes of the sanitized test build (scripts/sanitize.sh). g++
# already brings them (through libgcc-12-dev, with the libasan.so/libubsan.so that the link needs);
# they are named here so that the sanitized build's needs are checked, not assumed.
packages=(cmake ninja-build g++ libgtest-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libfmt-dev
          libasan8 libubsan1
          clang libclang-rt-14-dev  # clang and libFuzzer: scripts/fuzz.sh
          libpcre2-dev pkg-config)  # the tokenizer's pre-tokenizer patterns
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
