#!/usr/bin/env python3
"""Draws bench/scaling_bench.sh's scaling.tsv as an SVG: efficiency against workers (log scale),
measured points as dots, the cost model's prediction as a line, solid where measured and dashed
where projected.

    scaling_plot.py scaling.tsv scaling.svg
"""
import math
import sys


def main(tsv, svg):
    rows = {}
    with open(tsv) as f:
        next(f)
        for line in f:
            rate, n, measured, predicted, eff, peff = (line.rstrip("\n").split("\t") + [""] * 6)[:6]
            rows.setdefault(rate, []).append(
                (int(n), float(eff) if eff else None, float(peff) if peff else None))
    width, height, left, right, top, bottom = 640, 400, 60, 150, 30, 50
    max_n = max(n for pts in rows.values() for n, _, _ in pts)
    def x(n):
        return left + (width - left - right) * math.log2(n) / math.log2(max_n)
    def y(e):
        return top + (height - top - bottom) * (1 - min(max(e, 0), 1.05) / 1.05)
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2 - 60}" y="18" font-size="14">Synchronous scaling efficiency</text>']
    for e in [0, 0.25, 0.5, 0.75, 0.9, 1.0]:
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y(e):.1f}" y2="{y(e):.1f}" '
                   f'stroke="#ddd"/><text x="{left - 35}" y="{y(e) + 4:.1f}">{e:.2f}</text>')
    n = 1
    while n <= max_n:
        out.append(f'<line x1="{x(n):.1f}" x2="{x(n):.1f}" y1="{top}" y2="{height - bottom}" '
                   f'stroke="#eee"/><text x="{x(n) - 6:.1f}" y="{height - bottom + 16}">{n}</text>')
        n *= 2
    out.append(f'<text x="{(width - right) / 2}" y="{height - 10}">workers (a ps shard on each '
               f'host)</text>')
    out.append(f'<text x="12" y="{top + 120}" transform="rotate(-90 12 {top + 120})">'
               f'throughput / (N x one worker)</text>')
    for i, (rate, pts) in enumerate(sorted(rows.items())):
        c = colors[i % len(colors)]
        pts.sort()
        measured_max = max((n for n, e, _ in pts if e is not None), default=1)
        line = [(n, p) for n, _, p in pts if p is not None]
        solid = [(n, p) for n, p in line if n <= measured_max]
        dashed = [(n, p) for n, p in line if n >= measured_max]
        for seg, dash in [(solid, ""), (dashed, ' stroke-dasharray="6 4"')]:
            if len(seg) > 1:
                d = " ".join(f"{x(n):.1f},{y(p):.1f}" for n, p in seg)
                out.append(f'<polyline points="{d}" fill="none" stroke="{c}" stroke-width="2"{dash}/>')
        for n, e, _ in pts:
            if e is not None:
                out.append(f'<circle cx="{x(n):.1f}" cy="{y(e):.1f}" r="4" fill="{c}"/>')
        ly = top + 20 + 40 * i
        out.append(f'<circle cx="{width - right + 15}" cy="{ly}" r="4" fill="{c}"/>'
                   f'<text x="{width - right + 25}" y="{ly + 4}">{rate} measured</text>')
        out.append(f'<line x1="{width - right + 8}" x2="{width - right + 22}" y1="{ly + 16}" '
                   f'y2="{ly + 16}" stroke="{c}" stroke-width="2"/>'
                   f'<text x="{width - right + 25}" y="{ly + 20}">predicted</text>')
    out.append("</svg>")
    with open(svg, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
