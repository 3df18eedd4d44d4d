#!/usr/bin/env python3
"""Writes the planner scaling plot (solve CPU seconds vs computations, log-log) as SVG.

Usage: plot_scaling.py DATA.csv OUT.svg   (DATA.csv from bench/run_benchmarks.sh:
series,label,computations,cpu_s; series paper, synthetic or certified). Standard library only.
"""
import csv
import math
import sys


def main(src, dst):
    rows = [r for r in csv.DictReader(open(src)) if r["cpu_s"] not in ("", None)]
    pts = [(r["series"], r["label"], float(r["computations"]), max(float(r["cpu_s"]), 1e-3)) for r in rows]
    if not pts:
        sys.exit("no data")
    W, H, L, R, T, B = 640, 420, 70, 20, 30, 50
    x0, x1 = math.floor(math.log10(min(p[2] for p in pts))), math.ceil(math.log10(max(p[2] for p in pts)))
    y0, y1 = math.floor(math.log10(min(p[3] for p in pts))), math.ceil(math.log10(max(p[3] for p in pts)))
    y1 = max(y1, 2)  # show the 60 s target line
    sx = lambda v: L + (math.log10(v) - x0) / (x1 - x0) * (W - L - R)
    sy = lambda v: H - B - (math.log10(v) - y0) / (y1 - y0) * (H - T - B)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="13">Perseus planner: whole-frontier solve CPU time (1 core)</text>']
    for e in range(x0, x1 + 1):
        x = sx(10 ** e)
        out.append(f'<line x1="{x:.1f}" y1="{T}" x2="{x:.1f}" y2="{H - B}" stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{H - B + 15}" text-anchor="middle">1e{e}</text>')
    for e in range(y0, y1 + 1):
        y = sy(10 ** e)
        out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">1e{e} s</text>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">computations (ops in the DAG)</text>')
    y60 = sy(60)
    out.append(f'<line x1="{L}" y1="{y60:.1f}" x2="{W - R}" y2="{y60:.1f}" stroke="#c33" stroke-dasharray="4 3"/>')
    out.append(f'<text x="{W - R - 4}" y="{y60 - 4:.1f}" text-anchor="end" fill="#c33">60 s target</text>')
    colors = {"paper": "#1f77b4", "synthetic": "#ff7f0e", "certified": "#2ca02c"}
    names = {"paper": "GPT-3 175B paper cases, graph cut (unit 1 ms)", "synthetic": "synthetic, 40 freqs/op, graph cut (unit 1 ms)",
             "certified": "synthetic, certified planner (the default: graph cut + bound stage)"}
    for series, color in colors.items():
        sp = sorted((p for p in pts if p[0] == series), key=lambda p: p[2])
        for _, label, n, c in sp:
            out.append(f'<circle cx="{sx(n):.1f}" cy="{sy(c):.1f}" r="4" fill="{color}"><title>{label}: {n:.0f} ops, {c:.3f} s</title></circle>')
            out.append(f'<text x="{sx(n) + 6:.1f}" y="{sy(c) - 5:.1f}" font-size="9" fill="{color}">{label}</text>')
    for i, (series, color) in enumerate(colors.items()):
        out.append(f'<circle cx="{L + 15}" cy="{T + 12 + 16 * i}" r="4" fill="{color}"/>')
        out.append(f'<text x="{L + 25}" y="{T + 16 + 16 * i}">{names[series]}</text>')
    out.append("</svg>")
    open(dst, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
