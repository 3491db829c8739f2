"""Stalls: each workload run many times under each allocator, interleaved, and the distribution
of the runs' wall times (command: bench/stalls.py).

    python3 bench/stalls.py                          # 30 runs of largebuf, sqlite and bigstart
    python3 bench/stalls.py --runs 5 --workloads bigstart --allocators roost,mimalloc-v34

A program that is slow now and then (a thread waiting for the kernel to compact memory into a
huge page, say) shows in its slowest runs, which a median hides. For each run, each workload,
each allocator in turn (the order rotating from run to run) it starts the workload's program as
bench/suite.py does (suitelib/measure.py: preload, scrubbed environment, the report line's
verify=ok and malloc provider checked) and takes the process's wall time, with the
/proc/vmstat THP and compaction counters' change over the run (suitelib/thp.py: the whole
machine's). Prints per workload and allocator the runs that succeeded, min, median, p90 and max
of the wall time in ms, max/median, and the mean per run of thp_fault_alloc,
thp_fault_fallback, thp_collapse_alloc and compact_stall; writes every run and the summary as
JSON (--json). Workloads are the suite's (bench/suite.py --list): our programs only, built in
--build. Exits 1 if an allocator is missing or a run fails.
"""

import argparse
import json
import os
import statistics
import sys
import time

from . import allocators, thp
from .common import REPO, log, note_written, list_written, parse_list
from .measure import run_once
from .workloads import WORKLOADS

DEFAULT_WORKLOADS = ["largebuf", "sqlite", "bigstart"]
DEFAULT_ALLOCATORS = "roost,roost-hugeoff,mimalloc-v3,mimalloc-v3-nothp,mimalloc-v34," \
                     "mimalloc-v34-nothp"
SHOWN = ["thp_fault_alloc", "thp_fault_fallback", "thp_collapse_alloc", "compact_stall"]


def percentile(sorted_values, q):
    """The q-quantile (0..1) of sorted values, linear between the two nearest ranks."""
    if not sorted_values:
        return None
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(walls, moves):
    """The distribution of one workload's wall times (seconds) under one allocator, and the
    mean THP counter changes per run."""
    w = sorted(walls)
    if not w:
        return {"runs": 0}
    med = statistics.median(w)
    out = {"runs": len(w), "min_ms": w[0] * 1e3, "median_ms": med * 1e3,
           "p90_ms": percentile(w, 0.9) * 1e3, "max_ms": w[-1] * 1e3,
           "max_over_median": w[-1] / med if med > 0 else None}
    for k in thp.COUNTERS:
        vals = [m[k] for m in moves if k in m]
        if vals:
            out["mean_" + k] = sum(vals) / len(vals)
    return out


def table(results, workloads, allocs):
    lines = []
    for key in workloads:
        lines.append(f"\n### {key}\n")
        lines.append("| allocator | runs | min ms | median ms | p90 ms | max ms | max/median | "
                     + " | ".join(SHOWN) + " |")
        lines.append("|---" * (7 + len(SHOWN)) + "|")
        for a in allocs:
            s = results[key][a.name]["summary"]
            if not s["runs"]:
                lines.append(f"| {a.name} | 0 | " + " | ".join(["–"] * (5 + len(SHOWN))) + " |")
                continue
            thp_cells = [f"{s['mean_' + k]:.0f}" if "mean_" + k in s else "?" for k in SHOWN]
            lines.append(f"| {a.name} | {s['runs']} | {s['min_ms']:.1f} | {s['median_ms']:.1f} | "
                         f"{s['p90_ms']:.1f} | {s['max_ms']:.1f} | {s['max_over_median']:.2f} | "
                         + " | ".join(thp_cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    allocators.add_allocator_args(ap, DEFAULT_ALLOCATORS)
    ap.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS),
                    help=f"comma-separated suite workloads (default {','.join(DEFAULT_WORKLOADS)})")
    ap.add_argument("--runs", type=int, default=30, help="runs per workload and allocator "
                    "(default 30)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds one run may take")
    ap.add_argument("--json", default=os.path.join(REPO, "build", "bench", "stalls.json"),
                    help="where the runs and the summary go (default build/bench/stalls.json)")
    opts = ap.parse_args(argv)
    if opts.runs < 1:
        ap.error("--runs must be at least 1")
    table_by_key = {w.key: w for w in WORKLOADS}
    keys = parse_list(opts.workloads)
    bad = [k for k in keys if k not in table_by_key]
    if bad:
        ap.error(f"unknown workload(s) {', '.join(bad)}; see bench/suite.py --list")
    bindir = os.path.join(os.path.abspath(opts.build), "bench")
    for k in keys:
        path = os.path.join(bindir, table_by_key[k].binary_name)
        if not os.access(path, os.X_OK):
            ap.error(f"{path} is not built (ninja -C {opts.build} {table_by_key[k].binary_name})")
    allocs = allocators.allocators_from_args(ap, opts)
    missing = [a for a in allocs if a.missing]
    for a in missing:
        log(f"stalls: allocator {a.name} missing: {a.missing}")
    alive = [a for a in allocs if not a.missing]
    if not alive:
        return 1
    if not thp.read_vmstat():
        log("stalls: /proc/vmstat cannot be read: no THP counters")
    results = {k: {a.name: {"runs": []} for a in alive} for k in keys}
    failed = []
    total = opts.runs * len(keys) * len(alive)
    done = 0
    t0 = time.monotonic()
    for i in range(opts.runs):
        for k in keys:
            w = table_by_key[k]
            binary = os.path.join(bindir, w.binary_name)
            shift = i % len(alive)
            for a in alive[shift:] + alive[:shift]:
                before = thp.read_vmstat()
                r = run_once(binary, w.args, a, opts.timeout)
                moved = thp.delta(before, thp.read_vmstat())
                done += 1
                row = {"run": i + 1, "ok": r["ok"], "wall_s": round(r["wall_s"], 5),
                       "seconds": r["report"].get("seconds"), "maxrss_kib": r["maxrss_kib"],
                       "vmstat": moved}
                if not r["ok"]:
                    row["reason"] = r["reason"]
                    failed.append(f"{k} {a.name} run {i + 1}: {r['reason']}")
                results[k][a.name]["runs"].append(row)
        log(f"stalls: {done}/{total} runs ({time.monotonic() - t0:.0f} s)")
    for k in keys:
        for a in alive:
            rows = [r for r in results[k][a.name]["runs"] if r["ok"]]
            results[k][a.name]["summary"] = summarize([r["wall_s"] for r in rows],
                                                      [r["vmstat"] for r in rows])
    print(f"Stalls: wall time of the whole process, {opts.runs} interleaved runs per workload and "
          f"allocator; THP columns: mean change per run of /proc/vmstat's counters (the "
          f"machine's).")
    print(table(results, keys, alive), end="")
    for f in failed:
        log(f"stalls: FAILED: {f}")
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "runs": opts.runs,
           "workloads": {k: {"args": table_by_key[k].args, "program": table_by_key[k].binary_name}
                         for k in keys},
           "allocators": [{"name": a.name, "library": a.lib, "env": a.env, "version": a.version,
                           "source": a.source} for a in alive],
           "missing": {a.name: a.missing for a in missing},
           "loadavg": os.getloadavg(), "results": results, "failed": failed}
    os.makedirs(os.path.dirname(os.path.abspath(opts.json)), exist_ok=True)
    with open(opts.json, "w") as f:
        json.dump(out, f, indent=1)
    note_written(opts.json, "every run's wall time and THP counters, and the summary")
    list_written("stalls")
    return 1 if failed or missing else 0
