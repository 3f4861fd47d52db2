#!/usr/bin/env python3
"""Where a synchronous step's time went, on every worker at once.

    sync_timeline.py [--merged OUT.json] [--svg OUT.svg] CHIEF.json WORKER.json...

CHIEF.json is the chief's sync loop traced with RUNNEL_SYNC_TRACE=FILE@K (its K-th step: the one
that ends the workers' step K), each WORKER.json that worker's trace of its step K (apps/scaling
--trace FILE-{task}.json traces its middle timed step). The traces must come from processes of one
machine (simulated hosts share its steady clock: otherData.origin_ns lines them up).

Prints, per worker, when its step started, when its forward pass ran and how much of it was spent
waiting for parameters, its backward pass, when its last gradient was in and its token came, and
for the chief's step when the last gradients were in, applied and the tokens set; then which
worker held the step up and by how much. --merged writes one Chrome trace of all of them (a
process per file), for Perfetto; --svg draws a row per worker: its forward and backward layers,
when its last gradient was in and when its token came.
"""
import json
import os
import re
import sys


def load(path):
    with open(path) as f:
        j = json.load(f)
    try:
        origin = j["otherData"]["origin_ns"] / 1e6
    except (KeyError, TypeError):
        sys.exit(f"sync_timeline: {path} has no otherData.origin_ns (written by an older Runnel?)")
    names = {e["tid"]: e["args"]["name"] for e in j["traceEvents"] if e.get("ph") == "M"}
    nodes = [e for e in j["traceEvents"] if e.get("ph") == "X"]
    return origin, names, nodes, j["traceEvents"]


def span(nodes, t0, pred):
    """(first start, last end, summed duration) in ms from t0 of the nodes pred() accepts."""
    hit = [n for n in nodes if pred(n)]
    if not hit:
        return None
    return (t0 + min(n["ts"] for n in hit) / 1e3, t0 + max(n["ts"] + n["dur"] for n in hit) / 1e3,
            sum(n["dur"] for n in hit) / 1e3)


def draw(path, rows, worker_nodes):
    """One row per worker: forward layers light, backward dark, gradients in (red), token."""
    from html import escape
    end = max(r[6] for r in rows)
    label_w, width, row_h = 80, 1000, 22
    scale = (width - label_w - 20) / end
    x = lambda t: label_w + t * scale
    height = 50 + row_h * len(rows) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           'font-family="sans-serif" font-size="11">', '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="18" font-size="13">one synchronous step on {len(rows)} workers: forward '
           'layers (light), backward (dark), last gradient in (red), token (black)</text>']
    for ms in range(0, int(end) + 1, 100):
        out.append(f'<line x1="{x(ms):.1f}" y1="28" x2="{x(ms):.1f}" y2="{height - 30}" stroke="#ddd"/>'
                   f'<text x="{x(ms):.1f}" y="{height - 15}" text-anchor="middle">{ms} ms</text>')
    for k, (row, (t0, nodes)) in enumerate(zip(rows, worker_nodes)):
        y = 35 + k * row_h
        out.append(f'<text x="10" y="{y + 13}">worker {escape(str(row[0]))}</text>')
        out.append(f'<line x1="{x(row[1]):.1f}" y1="{y + 9}" x2="{x(row[6]):.1f}" y2="{y + 9}" '
                   'stroke="#999"/>')
        for n in nodes:
            if n["cat"] != "EmulatedCompute":
                continue
            colour = "#9ecae1" if n["name"].endswith("/forward") else "#3182bd"
            a = t0 + n["ts"] / 1e3
            out.append(f'<rect x="{x(a):.1f}" y="{y + 2}" width="{max(0.5, n["dur"] / 1e3 * scale):.1f}" '
                       f'height="14" fill="{colour}"/>')
        for t, colour in ((row[4][1], "#d62728"), (row[5][1], "#000")):
            out.append(f'<line x1="{x(t):.1f}" y1="{y}" x2="{x(t):.1f}" y2="{y + 18}" '
                       f'stroke="{colour}" stroke-width="2"/>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main(argv):
    merged = svg = None
    while len(argv) > 2 and argv[0] in ("--merged", "--svg"):
        if argv[0] == "--merged":
            merged = argv[1]
        else:
            svg = argv[1]
        argv = argv[2:]
    if len(argv) < 2:
        sys.exit(__doc__)
    chief_path, worker_paths = argv[0], argv[1:]
    chief = load(chief_path)
    workers = [load(p) for p in worker_paths]
    base = min([chief[0]] + [w[0] for w in workers])
    emulated = lambda kind: lambda n: n["cat"] == "EmulatedCompute" and n["name"].endswith(kind)
    rows = []
    for path, (origin, _, nodes, _) in zip(worker_paths, workers):
        t0 = origin - base
        m = re.search(r"(\d+)\D*$", os.path.basename(path))
        task = m.group(1) if m else path
        fwd = span(nodes, t0, emulated("/forward"))
        bwd = span(nodes, t0, emulated("/backward"))
        grads = span(nodes, t0, lambda n: n["cat"] == "AccumulatorApplyGradient")
        token = span(nodes, t0, lambda n: n["cat"] == "QueueDequeueV2")
        end = t0 + max(n["ts"] + n["dur"] for n in nodes) / 1e3
        if not (fwd and bwd and grads and token):
            sys.exit(f"sync_timeline: {path} is not a traced step of apps/scaling's synchronous "
                     "training (no forward, backward, gradient or token nodes)")
        rows.append((task, t0, fwd, bwd, grads, token, end))
        print(f"timeline: worker {task}: starts {t0:6.1f} ms; forward {fwd[0]:6.1f}-{fwd[1]:6.1f} "
              f"({fwd[2]:.0f} ms emulated, {fwd[1] - fwd[0] - fwd[2]:.0f} ms waiting for "
              f"parameters); backward {bwd[0]:6.1f}-{bwd[1]:6.1f} ({bwd[2]:.0f} ms emulated); "
              f"last gradient in {grads[1]:6.1f}; token {token[1]:6.1f}; step ends {end:6.1f}")
    c0 = chief[0] - base
    cn = chief[2]
    takes = span(cn, c0, lambda n: n["cat"] == "AccumulatorTakeGradient")
    applies = span(cn, c0, lambda n: n["cat"].startswith("Apply"))
    tokens = span(cn, c0, lambda n: n["cat"] in ("QueueReset", "QueueEnqueueV2"))
    if not (takes and applies and tokens):
        sys.exit(f"sync_timeline: {chief_path} is not a traced step of the chief's sync loop")
    print(f"timeline: the chief's step: starts {c0:6.1f} ms; every gradient in {takes[1]:6.1f}; "
          f"applied {applies[1]:6.1f}; tokens set {tokens[1]:6.1f}")
    last = max(rows, key=lambda r: r[4][1])
    first = min(rows, key=lambda r: r[4][1])
    print(f"timeline: worker {last[0]}'s gradients came last ({last[4][1]:.1f} ms), "
          f"{last[4][1] - first[4][1]:.1f} ms after worker {first[0]}'s; it started its forward "
          f"pass at {last[2][0]:.1f} ms (the first worker at {min(r[2][0] for r in rows):.1f}) "
          f"and waited {last[2][1] - last[2][0] - last[2][2]:.0f} ms for parameters during it; "
          f"from the last gradient to the tokens {tokens[1] - last[4][1]:.1f} ms, from the tokens "
          f"to the workers' next step (the step's end) {max(r[6] for r in rows) - tokens[1]:.1f} ms")
    if svg:
        draw(svg, rows, [(w[0] - base, w[2]) for w in workers])
    if merged:
        events = []
        for pid, (path, (origin, names, _, raw)) in enumerate(
                [(chief_path, chief)] + list(zip(worker_paths, workers))):
            shift = (origin - base) * 1e3
            label = "the chief's sync step" if pid == 0 else f"worker {rows[pid - 1][0]}'s step"
            events.append({"name": "process_name", "ph": "M", "pid": pid,
                           "args": {"name": label}})
            for e in raw:
                e = dict(e, pid=pid)
                if "ts" in e:
                    e["ts"] = e["ts"] + shift
                events.append(e)
        with open(merged, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ns"}, f)


if __name__ == "__main__":
    main(sys.argv[1:])
