#!/usr/bin/env python3
"""The loss curves of the trained models as one SVG: training loss (lines) and validation loss
(dots) against tokens seen, from the metrics.json files train/train.py writes."""
import argparse
import json
import math
import sys

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("metrics", nargs="+", help="metrics.json files")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    runs = [json.load(open(m)) for m in a.metrics]
    w, h, left, right, top, bottom = 720, 420, 60, 170, 30, 50
    per_step = [r["args"]["batch"] * r["args"]["seq"] for r in runs]
    xmax = max(r["steps"] * s for r, s in zip(runs, per_step))
    losses = [v for r in runs for _, v in r["curve"] + r["evals"]]
    ymin, ymax = math.floor(min(losses)), math.ceil(min(max(losses), 8.0))

    def x(t):
        return left + (w - left - right) * t / xmax

    def y(v):
        v = min(max(v, ymin), ymax)
        return top + (h - top - bottom) * (ymax - v) / (ymax - ymin)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{left}" y="18" font-size="14">training (lines) and validation (dots) loss, nats per token</text>']
    for v in range(ymin, ymax + 1):
        out.append(f'<line x1="{left}" x2="{w - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v}</text>')
    for i in range(6):
        t = xmax * i / 5
        out.append(f'<text x="{x(t):.1f}" y="{h - bottom + 18}" text-anchor="middle">{t / 1e6:.0f}M</text>')
    out.append(f'<text x="{(left + w - right) / 2}" y="{h - 10}" text-anchor="middle">tokens seen</text>')
    for i, (r, s) in enumerate(zip(runs, per_step)):
        c = COLOURS[i % len(COLOURS)]
        pts = " ".join(f"{x(step * s):.1f},{y(v):.1f}" for step, v in r["curve"])
        out.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.2" points="{pts}"/>')
        for step, v in r["evals"]:
            out.append(f'<circle cx="{x(step * s):.1f}" cy="{y(v):.1f}" r="3" fill="{c}"/>')
        label = f'{r["size"]} ({r["parameters"] / 1e6:.1f}M): val {r["val_loss"]:.3f}'
        out.append(f'<rect x="{w - right + 10}" y="{top + 20 * i}" width="12" height="12" fill="{c}"/>')
        out.append(f'<text x="{w - right + 28}" y="{top + 20 * i + 11}">{label}</text>')
    out.append("</svg>")
    open(a.out, "w").write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
