"""The report: statistics over the runs (medians, min-max, ratios, geometric means), the
Markdown tables printed on stdout (the docs page, bench/suitelib/docs.py, is made of the
same sections), and the CSV and JSON files."""

import csv
import json
import math
import os
import statistics

from .allocators import ROOST
from .common import fmt_fig, fmt_mib, note_written, scale_of
from .speeds import describe, two_speeds
from .workloads import SWEEP_WORK, UNITS

def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarize(results):
    """Per (case, allocator): medians, min, max; adds best and ratios."""
    summary = {}
    for c in results["cases"]:
        if c["wl"] in results["not_built"]:
            continue
        for a in results["allocators"]:
            rs = [r for r in results["runs"]
                  if r["case"] == c["id"] and r["allocator"] == a["name"]]
            good = [r for r in rs if r["ok"]]
            s = {"case": c["id"], "allocator": a["name"], "runs": len(rs),
                 "failed": len(rs) - len(good)}
            if good:
                fig = [r["figure"] for r in good]
                rss = [r["maxrss_kib"] for r in good]
                secs = [r["seconds"] for r in good if r["seconds"] is not None]
                cpu = [r["cpu_s"] for r in good if r.get("cpu_s") is not None]
                sys_s = [r["sys_s"] for r in good if r.get("sys_s") is not None]
                s.update(figure_median=statistics.median(fig), figure_min=min(fig),
                         figure_max=max(fig), rss_median_kib=statistics.median(rss),
                         rss_min_kib=min(rss), rss_max_kib=max(rss),
                         seconds_median=statistics.median(secs) if secs else None,
                         cpu_median_s=statistics.median(cpu) if cpu else None,
                         sys_median_s=statistics.median(sys_s) if sys_s else None)
                live = [r["live_kib"] for r in good if r.get("live_kib")]
                if live:
                    s["live_median_kib"] = statistics.median(live)
            summary[(c["id"], a["name"])] = s
        meds = [s for (cid, _), s in summary.items() if cid == c["id"] and "figure_median" in s]
        best_fig = max((s["figure_median"] for s in meds), default=None)
        best_rss = min((s["rss_median_kib"] for s in meds), default=None)
        for s in meds:
            s["figure_vs_best"] = s["figure_median"] / best_fig
            s["time_vs_best"] = best_fig / s["figure_median"]
            s["rss_vs_lowest"] = s["rss_median_kib"] / best_rss if best_rss else None
    return summary


def absent_word(w):
    """How a workload that could not run is called: a real program is not available, one of
    our programs not built."""
    return "not available" if w.get("kind") == "program" else "not built"


def reference_allocator(results, summary):
    """roost, or the first allocator that has figures when roost has none."""
    names = [a["name"] for a in results["allocators"] if not a.get("missing")]
    for n in [ROOST] + names:
        if any("figure_median" in summary.get((c["id"], n), {}) for c in results["cases"]):
            return n
    return None


def allocator_view(results):
    """(allocator names in table order, {missing one: why}, {(workload key, allocator) whose
    check run failed})."""
    allocs = results["allocators"]
    names = [a["name"] for a in allocs]
    missing = {a["name"]: a["missing"] for a in allocs if a.get("missing")}
    broken = {(b["workload"], b["allocator"]) for b in results.get("broken", [])}
    return names, missing, broken


def reps_text(results):
    reps = results["config"]["reps"]
    return f"{reps} interleaved repetitions" if reps > 1 else "1 repetition"


def summary_section(results, summary, relative_plot=None):
    """The summary: every allocator's throughput relative to roost's (or to the reference
    allocator's) per case, with geometric means, and the peak RSS relative to it. Lines.
    relative_plot: the file of the relative-throughput plot to show under it (docs page)."""
    names, missing, broken = allocator_view(results)
    alive = [n for n in names if n not in missing]
    cases = results["cases"]
    notbuilt = results["not_built"]
    ref = reference_allocator(results, summary)
    h = "###"
    summary_lines = []
    if ref is not None and len(alive) > 1:
        others = [n for n in names]
        summary_lines += [f"{h} Throughput relative to {ref} (median / {ref}'s median; > 1: "
                          f"faster than {ref})", ""]
        summary_lines.append("| case | " + " | ".join(others) + " |")
        summary_lines.append("|---|" + "---:|" * len(others))
        per_alloc_base = {n: [] for n in others}
        per_alloc_all = {n: [] for n in others}
        rss_base = {n: [] for n in others}
        shown_notbuilt = set()
        wls = {w["key"]: w for w in results["workloads"]}
        for c in cases:
            if c["wl"] in notbuilt:
                if c["wl"] not in shown_notbuilt:
                    shown_notbuilt.add(c["wl"])
                    summary_lines.append(f"| {c['wl']} | " + " | ".join(
                        absent_word(wls[c["wl"]]) for _ in others) + " |")
                continue
            r = summary.get((c["id"], ref), {})
            cells = []
            for n in others:
                if n in missing:
                    cells.append("missing")
                    continue
                o = summary.get((c["id"], n), {})
                if "figure_median" in r and "figure_median" in o:
                    x = o["figure_median"] / r["figure_median"]
                    cells.append(f"**{x:.2f}**" if n == ref else f"{x:.2f}")
                    per_alloc_all[n].append(x)
                    if c["base"]:
                        per_alloc_base[n].append(x)
                        rss_base[n].append(o["rss_median_kib"] / r["rss_median_kib"])
                else:
                    cells.append("failed" if o.get("failed") or (c["wl"], n) in broken
                                 else "n/a")
            summary_lines.append(f"| {c['short']} | " + " | ".join(cells) + " |")
        swept = any(not c["base"] for c in cases)

        def gm_row(title, data):
            cells = []
            for n in others:
                g = geomean(data[n])
                cells.append("missing" if n in missing else f"**{g:.2f}**" if g else "n/a")
            return f"| **{title}** | " + " | ".join(cells) + " |"

        summary_lines.append(gm_row("geometric mean" + (" (base configurations)" if swept
                                                        else ""), per_alloc_base))
        if swept:
            summary_lines.append(gm_row("geometric mean (all rows)", per_alloc_all))
        summary_lines += ["", f"{h} Peak RSS relative to {ref} (geometric mean of median / "
                          f"{ref}'s median over the base configurations; < 1: less memory than "
                          f"{ref})", ""]
        summary_lines.append("| | " + " | ".join(others) + " |")
        summary_lines.append("|---|" + "---:|" * len(others))
        cells = []
        for n in others:
            g = geomean(rss_base[n])
            cells.append("missing" if n in missing else f"{g:.2f}" if g else "n/a")
        summary_lines.append("| peak RSS | " + " | ".join(cells) + " |")
        if relative_plot:
            summary_lines += ["", f"![throughput relative to {ref}, per workload]"
                              f"({relative_plot})", "",
                              f"Each bar: an allocator's median throughput relative to {ref}'s "
                              f"for that workload, as in the table above (above 1: faster than "
                              f"{ref}; higher is better)."]
    elif ref is None:
        summary_lines.append("No allocator produced figures.")
    return summary_lines


def workload_sections(results, summary, thread_plots=None):
    """Per workload: what it stresses, the sweep table (if swept) and a table per case.
    Lines. thread_plots: {workload key: plot file} to show above the sweep tables."""
    names, missing, broken = allocator_view(results)
    notbuilt = results["not_built"]
    out = []
    by_wl = {}
    for c in results["cases"]:
        by_wl.setdefault(c["wl"], []).append(c)
    wls = {w["key"]: w for w in results["workloads"]}
    for key, wcases in by_wl.items():
        w = wls[key]
        out += ["", f"### {w['label']} (`{key}`)", ""]
        if key in notbuilt:
            out.append(f"**{absent_word(w)}**: {notbuilt[key]}")
            continue
        if w.get("stresses"):
            out.append(f"What it stresses: {w['stresses']}.")
        if w.get("kind") == "program":
            out.append(f"Measured: the whole run, every process of its tree ({w['tree']}) under "
                       f"the preload; the program from Debian's package {w['package']}; input "
                       "generated by the suite, output checked.")
            if w.get("system_libc"):
                out.append("The program links another allocator (Debian builds it with "
                           "jemalloc): glibc's runs preload the libc it links, so that glibc's "
                           "malloc serves them.")
        if len(wcases) > 1:
            if (thread_plots or {}).get(key):
                out += ["", f"![{key}: throughput against threads]({thread_plots[key]})"]
            out += sweep_table(w, wcases, names, missing, summary, broken)
        for c in wcases:
            out += case_table(w, c, names, missing, summary, broken)
    return out


def notes(results, context):
    """The notes under the tables: not-built workloads, the RSS cross-check, failed runs and
    the plots; with context, first the allocators, the machine and the roost commit (the docs
    page has its own tables of those). Lines, the first one empty."""
    out = [""]
    if context:
        host = results["machine"]
        for a in results["allocators"]:
            if a.get("missing"):
                out.append(f"- {a['name']}: **missing**: {a['missing']}")
            else:
                out.append(f"- {a['name']}: {a['version'] or '?'}, {a['source'] or ''}; "
                           f"{a['describe']}")
        la0, la1 = results["loadavg_start"], results["loadavg_end"]
        out.append(f"- machine: {host['cpus']} CPUs ({host['cpu']}), {host['memory_gib']} GiB, "
                   f"Linux {host['kernel']}, {host['distro']}; load average {la0[0]:.2f} before, "
                   f"{la1[0]:.2f} after (1-minute); {len(results['runs'])} runs in "
                   f"{results['elapsed_s']:.0f} s")
        c = results["commit"]
        if c["commit"]:
            out.append(f"- roost at commit {c['commit']}"
                       + (" plus uncommitted changes under src/ include/" if c["dirty"] else ""))
    wls = {w["key"]: w for w in results["workloads"]}
    for key, why in results["not_built"].items():
        out.append(f"- workload {key}: **{absent_word(wls[key])}**: {why}")
    if any(w.get("kind") == "program" and w["key"] not in results["not_built"]
           for w in results["workloads"]):
        out.append("- real programs (python3, g++, sqlite3, perl, db_bench, redis-server): "
                   "time is the whole run's wall time and the figure 1 / time; the check run, "
                   "under `LD_DEBUG=bindings`, showed every process of the tree taking `malloc` "
                   "from the allocator's library (the timed runs have the same environment but "
                   "`LD_DEBUG`); peak RSS is `ru_maxrss` of the run, which covers the processes "
                   "it waited for: the largest one's, not the tree's sum")
    diffs = [r["maxrss_kib"] - r["vmhwm_kib"] for r in results["runs"]
             if r["ok"] and r["vmhwm_kib"] is not None and r["vmhwm_kib"] >= 0]
    how = ("a subreaper-launched child, so it is the benchmark's own peak"
           if results["subreaper"] else
           "a direct child: WARNING, the figures include this runner's RSS at fork")
    if diffs:
        out.append(f"- peak RSS: `ru_maxrss` from `os.wait4` of {how}; it matches the program's "
                   f"own VmHWM within {min(diffs)}..{max(diffs)} KiB over all runs")
    two = two_speed_runs(results)
    if two:
        out.append("- **runs at two speeds** (a fast and a slow cluster of one allocator's "
                   "runs of a case: the machine's speed changed between runs; the medians "
                   "above mix the two, the standing against the best peer is judged by the "
                   "fast runs): " + "; ".join(two))
    errors = results["errors"]
    if not errors:
        out.append("- every run passed its own verification and reported `malloc` from the "
                   "expected library")
    else:
        out.append(f"- **{len(errors)} run(s) failed**:")
        for e in errors:
            out.append(f"  - {e}")
    if results.get("plots_note"):
        out.append(f"- plots: {results['plots_note']}")
    return out


def fmt_rate(figure, field):
    """One throughput figure with its scale and unit: '9.13 M objects/s'."""
    div, pre = scale_of([figure])
    return f"{fmt_fig(figure, div)} {pre}{UNITS.get(field, '')}".rstrip()


def two_speed_runs(results):
    """'case under allocator: 2 runs near ..., 1 run near ...' for every case and allocator
    whose good runs cluster at two speeds (speeds.py)."""
    out = []
    for c in results["cases"]:
        for a in results["allocators"]:
            rs = [r for r in results["runs"]
                  if r["case"] == c["id"] and r["allocator"] == a["name"] and r["ok"]
                  and r["figure"] > 0]
            split = two_speeds([1 / r["figure"] for r in rs])
            if split:
                field = rs[0].get("figure_field", "")
                text = describe(split, lambda t, field=field: fmt_rate(1 / t, field))
                out.append(f"{c['short']} under {a['name']}: {text}")
    return out


def render(results, summary):
    """The Markdown report printed on stdout: the tables per workload, then the summary and the
    notes."""
    out = ["## Benchmark suite: throughput and peak RSS", "",
           f"Medians of {reps_text(results)} (min–max in brackets). The figure "
           "is the program's own throughput (higher is better), the time its measured part "
           "in seconds, the peak RSS the whole process's (`ru_maxrss`, lower is better). "
           "× best: median / the highest median; × lowest: median / the lowest median."]
    out += workload_sections(results, summary)
    out += [""] + summary_section(results, summary)
    out += notes(results, context=True)
    return "\n".join(out) + "\n"


def sweep_table(w, wcases, names, missing, summary, broken):
    unit = UNITS.get(w["field"], w["field"])
    vals = [summary[(c["id"], n)]["figure_median"] for c in wcases for n in names
            if "figure_median" in summary.get((c["id"], n), {})]
    div, pre = scale_of(vals)
    xs = [c["threads"] for c in wcases]
    what = "pairs (P = C)" if w["threads"] == "pc" else "threads"
    out = ["", f"Median {pre}{unit} by {what} (the same total work at every count, "
           f"{SWEEP_WORK:g} x the base configuration's):", ""]
    out.append("| allocator | " + " | ".join(str(x) for x in xs) + " |")
    out.append("|---|" + "---:|" * len(xs))
    for n in names:
        if n in missing:
            out.append(f"| {n} | " + " | ".join("missing" for _ in xs) + " |")
            continue
        cells = []
        for c in wcases:
            s = summary.get((c["id"], n), {})
            cells.append(fmt_fig(s["figure_median"], div) if "figure_median" in s else
                         "failed" if s.get("failed") or (w["key"], n) in broken else "n/a")
        bold = "**" if n == ROOST else ""
        out.append(f"| {bold}{n}{bold} | " + " | ".join(cells) + " |")
    return out


def case_table(w, c, names, missing, summary, broken):
    unit = UNITS.get(w["field"], w["field"])
    vals = [summary[(c["id"], n)]["figure_median"] for n in names
            if "figure_median" in summary.get((c["id"], n), {})]
    div, pre = scale_of(vals)
    live = w.get("live")
    # A real program's CPU time (its tree's user + system): steadier than its wall time on a
    # shared machine, where the other jobs' load stretches the wall time.
    cpu = w.get("kind") == "program"
    # A workload that asks for it shows its CPU and system time (what the allocator costs in
    # the kernel: page faults, madvise, futexes).
    sys_shown = bool(w.get("cpu")) and not cpu
    shown = c.get("command") or f"bench_{w['program']} {' '.join(c['args'])}"
    out = ["", f"#### {c['label']}", "", f"`{shown}`", ""]
    head = (f"| allocator | {pre}{unit} median (min–max) | × best | time s |"
            + (" CPU s |" if cpu else "") + (" CPU s | sys s |" if sys_shown else "")
            + " peak RSS MiB median (min–max) | × lowest |")
    rule = ("|---|---:|---:|---:|" + ("---:|" if cpu else "") + ("---:|---:|" if sys_shown else "")
            + "---:|---:|")
    if live:
        label = w.get("live_label") or "peak live"
        head += f" {label} MiB | RSS ÷ {label.split()[-1]} |"
        rule += "---:|---:|"
    out += [head, rule]
    ncols = head.count("|") - 2
    for n in names:
        if n in missing:
            out.append(f"| {n} | missing |" + " |" * (ncols - 1))
            continue
        s = summary.get((c["id"], n), {})
        if "figure_median" not in s:
            why = ("failed (check run)" if (w["key"], n) in broken else
                   "failed" if s.get("failed") else "not run")
            out.append(f"| {n} | {why} |" + " |" * (ncols - 1))
            continue
        note = f" ({s['failed']}/{s['runs']} runs failed)" if s["failed"] else ""
        fig = (f"{fmt_fig(s['figure_median'], div)} ({fmt_fig(s['figure_min'], div)}–"
               f"{fmt_fig(s['figure_max'], div)}){note}")
        rss = (f"{fmt_mib(s['rss_median_kib'])} ({fmt_mib(s['rss_min_kib'])}–"
               f"{fmt_mib(s['rss_max_kib'])})")
        secs = f"{s['seconds_median']:.3f}" if s.get("seconds_median") is not None else "?"
        bold = "**" if n == ROOST else ""
        row = (f"| {bold}{n}{bold} | {fig} | {s['figure_vs_best']:.2f} | {secs} | "
               + ((f"{s['cpu_median_s']:.3f} | " if s.get("cpu_median_s") is not None
                   else "? | ") if cpu else "")
               + ((f"{s['cpu_median_s']:.3f} | {s['sys_median_s']:.3f} | "
                   if s.get("cpu_median_s") is not None and s.get("sys_median_s") is not None
                   else "? | ? | ") if sys_shown else "")
               + f"{rss} | {s['rss_vs_lowest']:.2f} |")
        if live:
            lv = s.get("live_median_kib")
            row += (f" {fmt_mib(lv)} | {s['rss_median_kib'] / lv:.2f} |" if lv else " ? | ? |")
        out.append(row)
    return out


# ----------------------------------------------------------------------------------------------
# Files.

RUN_COLUMNS = ["case", "workload", "threads", "label", "allocator", "rep", "ok", "reason",
               "figure", "figure_field", "seconds", "maxrss_kib", "vmhwm_kib", "live_kib",
               "process_wall_s", "cpu_s", "sys_s", "preload", "env", "malloc_from", "command"]
SUMMARY_COLUMNS = ["case", "allocator", "runs", "failed", "figure_median", "figure_min",
                   "figure_max", "figure_vs_best", "time_vs_best", "seconds_median", "cpu_median_s",
                   "rss_median_kib", "rss_min_kib", "rss_max_kib", "rss_vs_lowest",
                   "live_median_kib", "sys_median_s"]


def write_files(results, summary, out_dir):
    """Writes suite.json (all of results), suite-runs.csv (every run) and suite-summary.csv
    (per case and allocator) into out_dir; returns their paths (json, runs, summary)."""
    os.makedirs(out_dir, exist_ok=True)
    json_path = os.path.join(out_dir, "suite.json")
    with open(json_path, "w") as f:
        json.dump(results, f, indent=1)
    runs_csv = os.path.join(out_dir, "suite-runs.csv")
    with open(runs_csv, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=RUN_COLUMNS)
        wr.writeheader()
        for r in results["runs"]:
            wr.writerow({k: r.get(k) for k in RUN_COLUMNS})
    sum_csv = os.path.join(out_dir, "suite-summary.csv")
    with open(sum_csv, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=SUMMARY_COLUMNS, extrasaction="ignore")
        wr.writeheader()
        for s in summary.values():
            wr.writerow(s)
    note_written(runs_csv, "every run")
    note_written(sum_csv, "medians and ratios per case and allocator")
    note_written(json_path, "all of it: configuration, machine, versions, summary, runs")
    return json_path, runs_csv, sum_csv
