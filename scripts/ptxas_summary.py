#!/usr/bin/env python3
"""Summarise `nvcc -Xptxas -v` output (stdin) as one line per kernel: template arguments,
registers, spills. Usage: nvcc ... -Xptxas -v 2>&1 | python3 scripts/ptxas_summary.py"""
import re
import subprocess
import sys

current = None
spill = ""
for line in sys.stdin:
    m = re.search(r"Compiling entry function '([^']+)'", line)
    if m:
        name = m.group(1)
        try:
            name = subprocess.run(["c++filt", name], capture_output=True, text=True).stdout.strip()
        except OSError:
            pass
        current = re.sub(r"exactq::cuda_detail::", "", name)
        continue
    m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m:
        spill = f"spill {m.group(1)}/{m.group(2)}"
        continue
    m = re.search(r"Used (\d+) registers", line)
    if m and current:
        print(f"{current:80s} regs {m.group(1):>3s} {spill}")
        current = None
