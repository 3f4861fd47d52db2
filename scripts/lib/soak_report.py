"""Reads the soak's samples, draws them (SVG) and checks growth after the warm-up.
usage: soak_report.py SAMPLES.csv OUT.svg RSS_PERCENT [MIN_SECONDS]
Each process is judged from its own first sample (a task restarted during a chaos run is a new
process, named TASK@PID); with MIN_SECONDS, one that lived less than that is listed, not judged."""
import csv
import statistics
import sys

samples_path, svg_path, rss_pct = sys.argv[1], sys.argv[2], float(sys.argv[3])
min_life = float(sys.argv[4]) if len(sys.argv) > 4 else None
rows = list(csv.DictReader(open(samples_path)))
procs = sorted({r["process"] for r in rows})
end = max(int(r["seconds"]) for r in rows)
warm = max(30, end // 4)
failed = False
series = {}
for p in procs:
    mine = [r for r in rows if r["process"] == p]
    t = [int(r["seconds"]) for r in mine]
    rss = [int(r["rss_kib"]) / 1024 for r in mine]
    fds = [int(r["fds"]) for r in mine]
    thr = [int(r["threads"]) for r in mine]
    series[p] = (t, rss, fds, thr)
    if min_life is not None and t[-1] - t[0] < min_life:
        print(f"soak: {p}: lived {t[-1] - t[0]} s, under {min_life:.0f} s: not judged")
        continue
    mine_warm = t[0] + max(30, (t[-1] - t[0]) // 4)
    after = [i for i, s in enumerate(t) if s >= mine_warm]
    before = [i for i, s in enumerate(t) if s < mine_warm]
    if len(after) < 6 or not before:
        print(f"soak: {p}: too few samples after the {mine_warm - t[0]} s warm-up to judge")
        failed = True
        continue
    third = len(after) // 3
    # Peaks, not medians: memory rises and falls with each epoch (shuffle buffers, evaluation),
    # and a leak shows as peaks that climb past every earlier one. The baseline is the highest
    # peak of the first two thirds: a 3 s sample catches an epoch's peak only sometimes, and a
    # short run's first third alone (ten samples in CI's 2 minutes) can miss them all.
    first = max(rss[i] for i in after[:len(after) - third])
    last = max(rss[i] for i in after[-third:])
    growth = 100.0 * (last - first) / first
    # And the floor between the peaks (the median): a leak lifts it too, where one epoch's peak
    # caught higher than the others (a chaos run's evaluation spikes ~50 MiB) does not. Growth
    # fails when both grew past the bound.
    floor0 = statistics.median(rss[i] for i in after[:len(after) - third])
    floor1 = statistics.median(rss[i] for i in after[-third:])
    floor_growth = 100.0 * (floor1 - floor0) / floor0
    # Descriptors and threads come and go within an epoch too (each shard's file and its reader
    # are open only while the shard is read): the last third's median against the maximum of
    # everything before it, warm-up included. A leak of one per epoch lifts the median past it;
    # a transient that 3 s samples caught once late and never before (a 20-minute chaos run's
    # workers: +4 descriptors and threads in one sample each) does not.
    early = before + after[:len(after) - third]
    fd_warm, fd_mid = max(fds[i] for i in early), statistics.median(fds[i] for i in after[-third:])
    th_warm, th_mid = max(thr[i] for i in early), statistics.median(thr[i] for i in after[-third:])
    fd_max, th_max = max(fds[i] for i in after[-third:]), max(thr[i] for i in after[-third:])
    ok = min(growth, floor_growth) < rss_pct and fd_mid <= fd_warm and th_mid <= th_warm
    failed |= not ok
    print(f"soak: {p:3s} rss peaks {first:.1f} -> {last:.1f} MiB ({growth:+.2f}%), floor "
          f"{floor0:.1f} -> {floor1:.1f} MiB ({floor_growth:+.2f}%; growth when both pass {rss_pct}%), "
          f"fds {fd_warm} -> {fd_mid:g} (max {fd_max}), threads {th_warm} -> {th_mid:g} "
          f"(max {th_max}): "
          f"{'ok' if ok else 'GROWTH'}")

# The plot: resident memory per process over time, fds and threads as text.
W, H, L, B = 720, 360, 60, 40
top = max(max(s[1]) for s in series.values()) * 1.1
colors = ["#1f77b4", "#d62728", "#2ca02c"]
parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
         f'<text x="{W/2}" y="16" text-anchor="middle">resident memory during the soak ({end} s, warm-up {warm} s)</text>',
         f'<line x1="{L}" y1="{H-B}" x2="{W-10}" y2="{H-B}" stroke="black"/>',
         f'<line x1="{L}" y1="30" x2="{L}" y2="{H-B}" stroke="black"/>']
sx = lambda s: L + (W - 10 - L) * s / max(end, 1)
sy = lambda v: H - B - (H - B - 30) * v / top
for k in range(6):
    v = top * k / 5
    parts.append(f'<text x="{L-4}" y="{sy(v)+4}" text-anchor="end">{v:.0f}</text>')
    s = end * k / 5
    parts.append(f'<text x="{sx(s)}" y="{H-B+16}" text-anchor="middle">{s:.0f} s</text>')
parts.append(f'<text x="14" y="{H/2}" transform="rotate(-90 14 {H/2})" text-anchor="middle">MiB</text>')
parts.append(f'<line x1="{sx(warm)}" y1="30" x2="{sx(warm)}" y2="{H-B}" stroke="#999" stroke-dasharray="4"/>')
for n, (p, (t, rss, fds, thr)) in enumerate(series.items()):
    pts = " ".join(f"{sx(a):.1f},{sy(b):.1f}" for a, b in zip(t, rss))
    parts.append(f'<polyline fill="none" stroke="{colors[n % 3]}" points="{pts}"/>')
    parts.append(f'<text x="{L+10}" y="{44+14*n}" fill="{colors[n % 3]}">{p}: fds {min(fds)}-{max(fds)}, threads {min(thr)}-{max(thr)}</text>')
parts.append("</svg>")
open(svg_path, "w").write("\n".join(parts))
print(f"soak: plot {svg_path}")
sys.exit(1 if failed else 0)
