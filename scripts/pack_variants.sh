#!/usr/bin/env bash
# Packs the variant binaries in .out/bin (exactq-*.xz and exactq_cuda_tests-*.xz, from
# scripts/build_variant.sh or scripts/build_qmv_variant.sh) into one archive, .out/bin/variants.tar.xz, with a dictionary large
# enough to hold a whole binary: the variants differ in a few kernels, so five of them take the
# carry of one and a half (a call carries 64 MiB). Variants already in the archive stay (a new
# one of the same name replaces its old one). scripts/gpu_unpack.sh unpacks it.
# ALL=1 packs the main binaries (exactq.xz, exactq_cuda_tests.xz) into it too: a variant's test
# binary shares most of its bytes with them, so main's and a variant's tests then fit one carry.
set -euo pipefail
cd "$(dirname "$0")/../.out/bin"
tmp=$(mktemp -d)
[[ -e variants.tar.xz ]] && xz -dc variants.tar.xz | tar xf - -C "$tmp"
main=()
[[ ${ALL:-0} == 1 ]] && main=(exactq.xz exactq_cuda_tests.xz)
for f in "${main[@]}" exactq-*.xz exactq_cuda_tests-*.xz; do
  [[ -e $f ]] || continue
  xz -dc "$f" >"$tmp/${f%.xz}"
  chmod +x "$tmp/${f%.xz}"
  rm "$f"
done
tar cf - -C "$tmp" . | xz -T2 --lzma2=preset=6,dict=192MiB >variants.tar.xz
rm -rf "$tmp"
ls -la
