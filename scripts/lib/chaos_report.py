#!/usr/bin/env python3
"""scripts/chaos's judge: one result line per run (`line`), and the table of a report (`table`).

A line is `CASE what=... PASSED|FAILED(reasons) recovery=S back=N accuracy=A (delta) ...`: the
checks of scripts/chaos's header, each from the run's files (LOGS/CASE-R/)."""
import argparse
import glob
import os
import re
import statistics
import sys


def chief_out(run_dir):
    """What the chief printed on stdout ("" when there is nothing)."""
    try:
        return open(os.path.join(run_dir, "worker-0.out")).read()
    except OSError:
        return ""


def accuracy(run_dir):
    """The chief's final test accuracy, or None."""
    text = chief_out(run_dir)
    found = re.findall(r"test accuracy: ([0-9.]+)", text)
    return float(found[-1]) if found else None


def sync_counts(run_dir):
    """The chief's (dropped, refused) gradient counts from its last "sync:" line, or None."""
    text = chief_out(run_dir)
    found = re.findall(r"sync: (\d+) stale gradients dropped, (\d+) second gradients", text)
    return tuple(int(x) for x in found[-1]) if found else None


def samples(run_dir):
    out = []
    try:
        for row in open(os.path.join(run_dir, "samples")):
            parts = row.split()
            if len(parts) == 2:
                out.append((float(parts[0]), int(parts[1])))
    except (OSError, ValueError):
        pass
    return out


def longest_stall(rows):
    """The chief's longest wait for a step once training began: between samples whose step
    differs."""
    stall, last_t, last_s = 0.0, None, None
    for t, s in rows:
        if s == 0:
            continue  # before the first step: starting up
        if last_s is None or s != last_s:
            if last_t is not None:
                stall = max(stall, t - last_t)
            last_t, last_s = t, s
    return stall


def address(run_dir, job, task):
    """The address of job:task from cluster-run's "cluster ps=...;worker=..." line."""
    try:
        text = open(os.path.join(run_dir, "cluster-run.out")).read()
    except OSError:
        return None
    m = re.search(r"cluster (ps=[^\s]+)", text)
    if not m:
        return None
    jobs = dict(part.split("=", 1) for part in m.group(1).split(";"))
    hosts = jobs.get(job, "").split(",")
    return hosts[task] if 0 <= task < len(hosts) else None


def named(run_dir, job, task, offsets=None):
    """Whether some log line names the victim (its task or its address) as gone, and whether
    its restart (if any) was logged; with `offsets` ({path: bytes}), only in what each log got
    past its offset (a file not in it, whole)."""
    addr = address(run_dir, job, task)
    pattern = re.compile(
        r"(/job:%s/replica:0/task:%d|%s task %d|%s)" % (job, task, job, task, re.escape(addr or "-"))
    )
    cause = re.compile(r"(lost|unavailable|missing|timed out|exited|failed|did not answer|"
                       r"restart|late|unreachable|backup|stalled|slow)", re.I)
    for path in glob.glob(os.path.join(run_dir, "*.log")) + [os.path.join(run_dir, "cluster-run.out")]:
        try:
            with open(path, "rb") as f:
                f.seek((offsets or {}).get(path, 0))
                text = f.read().decode(errors="replace")
        except OSError:
            continue
        for row in text.replace("\r", "\n").splitlines():
            if pattern.search(row) and cause.search(row) and "serving on" not in row:
                return True
    return False


def ending_reasons(a):
    """What is wrong with how a run ended (args: hung, rc, left_hosts, left_procs, verify)."""
    reasons = []
    if a.hung:
        reasons.append("hung: still running after the deadline")
    elif a.rc != 0:
        reasons.append("cluster-run exited %d" % a.rc)
    if a.left_hosts:
        reasons.append("%d hosts left" % a.left_hosts)
    if a.left_procs:
        reasons.append("%d processes left" % a.left_procs)
    if a.verify != "ok":
        reasons.append("a checkpoint does not verify (verify.txt)")
    return reasons


def accuracy_outside(acc, base, points):
    """How far acc is outside the fault-free runs' range (0 inside it), and why that fails, if
    it does: below the range by more than `points`. What a fault can do to training (gradients
    lost, steps redone from a checkpoint, a replica's stale weights) costs accuracy; ending
    higher is the spread of a job whose steps drop whichever gradient comes last, and a run
    whose step went back redid those steps on batches the fault-free run never reached (the
    workers' input is not rewound with the step). The one fault that could lift accuracy, a
    gradient applied twice, is checked directly: the accumulators refuse and count it."""
    lo, hi = min(base), max(base)
    delta = 0.0 if lo <= acc <= hi else (acc - lo if acc < lo else acc - hi)
    if delta < -points / 100:
        return delta, ("accuracy %.4f is %.2f points below the fault-free %.4f-%.4f"
                       % (acc, -100 * delta, lo, hi))
    return delta, None


def line(a):
    run_dir = a.dir
    reasons = ending_reasons(a)
    acc = accuracy(run_dir)
    # The fault-free runs so far (LOGS/none-*), the reference of accuracy_outside.
    base = [b for b in (accuracy(d) for d in glob.glob(os.path.join(a.baseline, "none-*")))
            if b is not None]
    # No step's mean holds one replica twice: the accumulators refuse a second gradient (and
    # count it); the chief's count says how often one came.
    counts = sync_counts(run_dir)
    if counts is None and not a.hung and a.rc == 0:
        reasons.append("the chief printed no sync counts")
    rows = samples(run_dir)
    recovery = back = None
    if a.case != "none":
        after = [(t, s) for t, s in rows if t > a.fault_at]
        before = [s for t, s in rows if t <= a.fault_at]
        # Two past the step at the fault (a progress line may report a step completed just
        # before it), or below it: a restore took the step back and a step completed since.
        first = next((t for t, s in after if s >= a.fault_step + 2 or s < a.fault_step), None)
        recovery = first - a.fault_at if first is not None else None
        if recovery is None:
            reasons.append("no step completed after the fault")
        if before and after:
            back = max(0, max(before) - min(s for _, s in after))
            if back > a.interval:
                reasons.append("the global step went back %d (checkpoint interval %d)"
                               % (back, a.interval))
        job, task = a.victim.split(":")
        if not named(run_dir, job, int(task)):
            reasons.append("no log line names %s %s as gone" % (job, task))
    delta = None
    if acc is None:
        reasons.append("no final accuracy")
    elif a.case != "none" and base:
        delta, why = accuracy_outside(acc, base, a.points)
        if why:
            reasons.append(why)
    stall = longest_stall(rows)
    if a.step_timeout and stall > a.step_timeout:
        reasons.append("the chief waited %.1f s for a step, past the %d s step timeout"
                       % (stall, a.step_timeout))
    restarts = 0
    try:
        restarts = open(os.path.join(run_dir, "cluster-run.out")).read().count("restarting it")
    except OSError:
        pass
    verdict = "PASSED" if not reasons else "FAILED(" + "; ".join(reasons) + ")"
    fields = [
        os.path.basename(run_dir),
        verdict,
        "recovery=%s" % ("%.1fs" % recovery if recovery is not None else "-"),
        "back=%s" % (back if back is not None else "-"),
        "accuracy=%s" % ("%.4f" % acc if acc is not None else "-"),
        "outside=%s" % ("%+.4f" % delta if delta is not None else "-"),
        "restarts=%d" % restarts,
        "refused=%s" % (counts[1] if counts else "-"),
        "stall=%.1fs" % stall,
        "fault=%s" % a.what.replace(" ", "_"),
    ]
    print(" ".join(fields))


def table(path):
    runs = {}
    for row in open(path):
        parts = row.split()
        if len(parts) < 3 or not re.match(r"^[a-z_]+-\d+$", parts[0]):
            continue
        case = parts[0].rsplit("-", 1)[0]
        f = dict(p.split("=", 1) for p in parts[2:] if "=" in p)
        runs.setdefault(case, []).append((parts[1].startswith("PASSED"), f))
    print("\n%-15s %7s %22s %12s %10s" % ("case", "passed", "recovery median (max)", "max back",
                                            "accuracy"))
    for case, rs in runs.items():
        rec = [float(f["recovery"][:-1]) for _, f in rs if f.get("recovery", "-") != "-"]
        back = [int(f["back"]) for _, f in rs if f.get("back", "-") != "-"]
        acc = [f["accuracy"] for _, f in rs if f.get("accuracy", "-") != "-"]
        print("%-15s %4d/%-2d %22s %12s %10s" % (
            case, sum(ok for ok, _ in rs), len(rs),
            "%.1f s (%.1f s)" % (statistics.median(rec), max(rec)) if rec else "-",
            str(max(back)) if back else "-",
            "%s-%s" % (min(acc), max(acc)) if acc else "-"))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "table":
        table(sys.argv[2])
        return
    p = argparse.ArgumentParser()
    p.add_argument("mode")
    for name in ("case", "what", "dir", "verify", "baseline", "victim"):
        p.add_argument("--" + name.replace("_", "-"), dest=name, default="")
    for name in ("rc", "hung", "fault_step", "interval", "left_hosts", "left_procs",
                 "step_timeout"):
        p.add_argument("--" + name.replace("_", "-"), dest=name, type=int, default=0)
    p.add_argument("--fault-at", dest="fault_at", type=float, default=0.0)
    p.add_argument("--points", type=float, default=0.5)
    line(p.parse_args())


if __name__ == "__main__":
    main()
