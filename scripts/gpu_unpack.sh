#!/usr/bin/env bash
# On the GPU machine: unpacks what scripts/build_for_gpu.sh put in .out/bin (xz, or Python's lzma
# where xz is missing). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.out/bin"
# Variants packed together (scripts/pack_variants.sh): one archive, their shared bytes stored once.
for f in *.tar.xz; do
  [[ -e $f ]] || continue
  if command -v xz >/dev/null; then xz -dc "$f" | tar xf -; else python3 -c "import lzma,sys,tarfile; tarfile.open(fileobj=lzma.open(sys.argv[1])).extractall()" "$f"; fi
  rm "$f"
done
for f in *.xz; do
  [[ -e $f ]] || continue
  if command -v xz >/dev/null; then xz -d -f "$f"; else python3 -c "import lzma,sys; open(sys.argv[1][:-3],'wb').write(lzma.open(sys.argv[1]).read())" "$f" && rm "$f"; fi
  chmod +x "${f%.xz}"
done
cat commit 2>/dev/null | head -3
