#!/usr/bin/env python3
"""The training corpus: the Python source files that Debian 12's Python packages install.

Every file comes from one of PACKAGES (all under the Python Software Foundation License, see
/usr/share/doc/<package>/copyright), listed by `dpkg -L`, so any Debian 12 machine with those
packages rebuilds the same corpus; train/corpus-files.tsv records each file's package, size,
SHA-256 and split, and `--check` compares a rebuild with it byte for byte.

A file goes to the validation split when the first byte of the SHA-256 of its path is below 13
(about 5 %), so the split does not depend on the file's content or on the order of listing.

Writes OUT/corpus.jsonl ({"path", "split", "text"} per file, sorted by path) and OUT/files.tsv.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys

PACKAGES = ["libpython3.11-minimal", "libpython3.11-stdlib", "python3-distutils", "python3-lib2to3"]
VALIDATION_BELOW = 13  # of 256


def package_files(package):
    listed = subprocess.run(["dpkg", "-L", package], check=True, capture_output=True, text=True).stdout
    return [p for p in listed.splitlines() if p.endswith(".py") and os.path.isfile(p) and not os.path.islink(p)]


def split_of(path):
    return "val" if hashlib.sha256(path.encode()).digest()[0] < VALIDATION_BELOW else "train"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--check", help="a files.tsv to compare the rebuilt list with")
    args = parser.parse_args()
    rows, seen = [], set()
    for package in PACKAGES:
        for path in package_files(package):
            if path in seen:
                continue
            seen.add(path)
            data = open(path, "rb").read()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                print(f"skipping {path}: not UTF-8", file=sys.stderr)
                continue
            rows.append((path, package, len(data), hashlib.sha256(data).hexdigest(), split_of(path), text))
    rows.sort()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for path, _, _, _, split, text in rows:
            f.write(json.dumps({"path": path, "split": split, "text": text}, ensure_ascii=False) + "\n")
    manifest = "".join(f"{p}\t{pkg}\t{n}\t{h}\t{s}\n" for p, pkg, n, h, s, _ in rows)
    with open(os.path.join(args.out, "files.tsv"), "w") as f:
        f.write("path\tpackage\tbytes\tsha256\tsplit\n" + manifest)
    for split in ("train", "val"):
        chosen = [r for r in rows if r[4] == split]
        print(f"{split}: {len(chosen)} files, {sum(r[2] for r in chosen)} bytes")
    if args.check:
        expected = open(args.check).read().split("\n", 1)[1]
        if expected != manifest:
            print(f"corpus differs from {args.check}", file=sys.stderr)
            return 1
        print(f"corpus matches {args.check}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
