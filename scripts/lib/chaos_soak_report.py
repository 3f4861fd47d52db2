#!/usr/bin/env python3
"""scripts/chaos-soak's judge: the report of one long run with faults (LOGS/run/): the steps it
completed, each fault with its recovery time and the time it cost, and whether every process's
memory, descriptors and threads stayed flat (scripts/lib/soak_report.py)."""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chaos_report import (accuracy, ending_reasons, longest_stall, named, samples,  # noqa: E402
                          sync_counts)

# A fault's cost: how much later than the pace before the first fault the chief got this many
# steps past the step at the fault.
AHEAD = 20


def faults(run_dir):
    """(number, time, step, case, job, task, what, offsets) per fault injected."""
    out = []
    try:
        rows = open(os.path.join(run_dir, "faults")).read().splitlines()
    except OSError:
        return out
    for row in rows:
        n, at, step, case, victim, what = row.split(" ", 5)
        job, task = victim.split(":")
        offsets = {}
        try:
            for line in open(os.path.join(run_dir, "fault-%s.offsets" % n)):
                size, path = line.rstrip("\n").split(" ", 1)
                offsets[path] = int(size)
        except OSError:
            pass
        out.append((int(n), float(at), int(step), case, job, int(task), what.replace("_", " "),
                    offsets))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--verify", default="")
    for name in ("rc", "hung", "steps", "interval", "left_hosts", "left_procs", "seconds",
                 "step_timeout"):
        p.add_argument("--" + name.replace("_", "-"), dest=name, type=int, default=0)
    a = p.parse_args()
    run_dir, reasons = a.dir, ending_reasons(a)
    rows = samples(run_dir)
    fs = faults(run_dir)
    last = max((s for _, s in rows), default=0)
    if last < a.steps and not a.hung and a.rc == 0:
        reasons.append("the chief's last step seen is %d of %d" % (last, a.steps))
    # The pace before the first fault, from the tenth step on (past starting up).
    first_fault = fs[0][1] if fs else float("inf")
    calm = [(t, s) for t, s in rows if s >= 10 and t < first_fault]
    pace = None
    if len(calm) >= 2 and calm[-1][0] > calm[0][0] and calm[-1][1] > calm[0][1]:
        pace = (calm[-1][1] - calm[0][1]) / (calm[-1][0] - calm[0][0])
    # How far the global step ever went back (a restore).
    back, high = 0, 0
    for _, s in rows:
        high = max(high, s)
        back = max(back, high - s)
    if back > a.interval:
        reasons.append("the global step went back %d (checkpoint interval %d)" % (back, a.interval))
    stall = longest_stall(rows)
    if a.step_timeout and stall > a.step_timeout:
        reasons.append("the chief waited %.1f s for a step, past the %d s step timeout"
                       % (stall, a.step_timeout))
    lines, lost_total = [], 0.0
    for n, at, step, case, job, task, what, offsets in fs:
        after = [(t, s) for t, s in rows if t > at]
        rec = next((t - at for t, s in after if s >= step + 2 or s < step), None)
        reach = next((t - at for t, s in after if s >= step + AHEAD), None)
        lost = reach - AHEAD / pace if reach is not None and pace else None
        if lost is not None:
            lost_total += max(lost, 0.0)
        name_ok = named(run_dir, job, task, offsets)
        if rec is None:
            reasons.append("fault %d (%s): no step completed after it" % (n, what))
        if not name_ok:
            reasons.append("fault %d (%s): no log line after it names %s %d" % (n, what, job, task))
        lines.append("%3d %8.1f %6d  %-14s %-10s %9s %9s  %s" % (
            n, at - (rows[0][0] if rows else at), step, case, "%s %d" % (job, task),
            "%.1f s" % rec if rec is not None else "-",
            "%.1f s" % lost if lost is not None else "-", "named" if name_ok else "NOT NAMED"))
    proc = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "soak_report.py"),
                           os.path.join(run_dir, "resources.csv"),
                           os.path.join(run_dir, "resources.svg"), "5", "90"],
                          capture_output=True, text=True)
    if proc.returncode != 0 and ("Traceback" in proc.stderr or "can't open" in proc.stderr):
        reasons.append("the resource judge (soak_report.py) failed: below")
    elif proc.returncode != 0:
        reasons.append("a process grew (the processes' lines below)")
    elif not any(l.endswith(": ok") for l in proc.stdout.splitlines()):
        reasons.append("no process lived long enough to judge its growth")
    if not fs:
        reasons.append("no fault was injected (the job ended first: raise --steps)")
    counts = sync_counts(run_dir)
    acc = accuracy(run_dir)
    if acc is None:
        reasons.append("no final accuracy")
    print("chaos-soak: %s" % ("PASSED" if not reasons else "FAILED(" + "; ".join(reasons) + ")"))
    print("steps: the chief reached %d of %d in %d s (%s steps/s before the first fault); final "
          "test accuracy %s; %s" % (
              last, a.steps, a.seconds, "%.2f" % pace if pace else "-",
              "%.4f" % acc if acc is not None else "-",
              "%d stale gradients dropped, %d second gradients refused" % counts
              if counts else "no sync counts"))
    print("faults: %d; time lost to them %.1f s of %d s (each: how much later than the pace "
          "before the first fault the chief was %d steps past the step at the fault)"
          % (len(fs), lost_total, a.seconds, AHEAD))
    print("  #   at (s)   step  case           victim      recovery      lost  log")
    for line in lines:
        print(line)
    print("steps went back at most %d (checkpoint interval %d); the chief's longest wait for a "
          "step %.1f s (step timeout %d s)" % (back, a.interval, stall, a.step_timeout))
    print(proc.stdout.rstrip())
    if proc.stderr:
        print(proc.stderr.rstrip())


if __name__ == "__main__":
    main()
