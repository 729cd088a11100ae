#!/usr/bin/env python3
"""Finds the hottest loop of a kernel's SASS (the backward branch whose body holds the most FFMAs)
and prints its opcode histogram, so instruction counts per weight can be read off the code.
Usage: cuobjdump -sass -fun NAME BINARY | scripts/sass_loop.py [--body]"""
import collections
import re
import sys

lines = sys.stdin.read().splitlines()
code = []  # (address, opcode, text)
pattern = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)(.*?);")
for line in lines:
    m = pattern.search(line)
    if m:
        code.append((int(m.group(1), 16), m.group(3), line.strip()))
index = {addr: i for i, (addr, _, _) in enumerate(code)}
best = None
for i, (addr, op, text) in enumerate(code):
    if not op.startswith("BRA"):
        continue
    t = re.search(r"0x([0-9a-f]+)", text.split("BRA", 1)[1])
    if not t:
        continue
    target = int(t.group(1), 16)
    if target >= addr or target not in index:
        continue
    body = code[index[target]: i + 1]
    ffma = sum(1 for _, o, _ in body if o.startswith("FFMA"))
    if best is None or ffma > best[0]:
        best = (ffma, target, addr, body)
if best is None:
    sys.exit("no loop found")
ffma, start, end, body = best
hist = collections.Counter(o.split(".")[0] for _, o, _ in body)
print(f"hottest loop {start:#x}..{end:#x}: {len(body)} instructions, {ffma} FFMA")
for op, n in hist.most_common():
    print(f"  {op:10s} {n:5d}")
if "--body" in sys.argv:
    for _, _, text in body:
        print(text)
