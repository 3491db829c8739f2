"""The command line: options, the run from selection to report (main), --list, --self-test,
and the plotting entry that another python3 runs (--plot-json)."""

import argparse
import contextlib
import csv
import io
import json
import os
import shutil
import sys
import tempfile
import time

from . import docs, measure, plots, programs, report
from .allocators import (GLIBC, PEER_VARIANTS, ROOST, VARIANTS, git_commit, machine_info,
                         parse_roost_libs, resolve_allocators)
from .common import BENCH_DIR, REPO, forget_written, list_written, log, parse_list, rel
from .peers import DEFAULT_PEERS, OPT_IN_PEERS, PEER_NAMES
from .workloads import (DEFAULT_THREADS_FULL, SELF_TEST_WORKLOADS, WORKLOADS, make_cases,
                        select_workloads)

DESCRIPTION = ("bench/suite.py: the benchmark suite, roost against every allocator a user would "
               "pick instead.")


def is_program(w):
    return getattr(w, "kind", "") == "program"


def print_list(table, bindir):
    print("Workloads (sets: default = `make bench`, full = `--full`):")
    for w in table:
        if is_program(w):
            built = "available" if w.available() else "NOT AVAIL"
            print(f"  {w.key:15} {'+'.join(w.sets):12} {built:9} {'':24} "
                  f"{w.path} (Debian {w.package}) on generated input, {' '.join(w.args)}")
            print(f"  {'':15} {w.label}; figure runs/s of the whole process tree")
            continue
        built = "built" if os.access(os.path.join(bindir, w.binary_name), os.X_OK) else \
            "NOT BUILT"
        sw = {"t": "sweeps -t", "pc": "sweeps -p/-c"}.get(w.threads, "") \
            if w.sweep else ("-t (no sweep in --full)" if w.threads else "")
        print(f"  {w.key:15} {'+'.join(w.sets):12} {built:9} {sw:24} "
              f"{w.binary_name} {' '.join(w.args)}")
        print(f"  {'':15} {w.label}; figure {w.field}")
    print("Allocators: roost, glibc, " + ", ".join(DEFAULT_PEERS)
          + " (peers from bench/suitelib/peers.py); opt-in peers: " + ", ".join(OPT_IN_PEERS)
          + "; opt-in variants: "
          + "; ".join(f"{k} ({v[2]})" for k, v in list(VARIANTS.items())
                      + list(PEER_VARIANTS.items())))


def self_test(opts):
    """Two tiny workloads of ours (and one that is not built) and a tiny real program under
    glibc and roost, 1 rep; and the real programs' own checks (programs.self_test)."""
    tmp = tempfile.mkdtemp(prefix="roost-suite-selftest-")
    page_path = os.path.join(tmp, "docs", "BENCHMARKS.md")
    argv = ["--build-dir", opts.build_dir, "--workloads", "prodcons,symmetric,absent,python-json",
            "--allocators", "roost,glibc", "--reps", "1", "--threads", "1,2", "--no-install",
            "--no-plots", "--out-dir", tmp, "--docs", page_path, "--timeout", "60"]
    log(f"suite self-test: {' '.join(argv)}")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(argv, table=SELF_TEST_WORKLOADS + programs.SELF_TEST_PROGRAMS,
                  name_files=False)
    forget_written()  # in the temporary folder, removed below (or named on failure)
    text = buf.getvalue()
    problems = programs.self_test()
    # python3 as Debian installs it: there wherever the suite runs, else shown as not available.
    real = programs.SELF_TEST_PROGRAMS[0].available()
    cases = 4 if real else 3
    if rc != 0:
        problems.append(f"the run exited {rc}")
    for needle in ("prodcons (tiny), 1P/1C", "prodcons (tiny), 2P/2C",
                   "symmetric (tiny), 2 threads",
                   "| **roost** |", "| glibc |", "Throughput relative to roost",
                   "geometric mean", "**not built**",
                   "Measured: the whole run" if real else "**not available**"):
        if needle not in text:
            problems.append(f"no `{needle}` in the tables")
    if real and "/usr/bin/python3 IN/json_doc.py 300 " not in text:
        problems.append("no real program's command line in the tables")
    try:
        with open(os.path.join(tmp, "suite-runs.csv")) as f:
            rows = list(csv.DictReader(f))
        if len(rows) != cases * 2:
            problems.append(f"suite-runs.csv has {len(rows)} runs, expected {cases * 2}")
        bad = [r for r in rows if r["ok"] != "True" or not r["figure"]]
        if bad:
            problems.append(f"{len(bad)} failed run(s) in suite-runs.csv: "
                            + "; ".join(f"{r['case']} {r['allocator']}: {r['reason']}"
                                        for r in bad))
        with open(os.path.join(tmp, "suite-summary.csv")) as f:
            srows = list(csv.DictReader(f))
        if len(srows) != cases * 2:
            problems.append(f"suite-summary.csv has {len(srows)} rows, expected {cases * 2}")
        with open(os.path.join(tmp, "suite.json")) as f:
            js = json.load(f)
        if "absent" not in js["not_built"]:
            problems.append("suite.json does not report the absent workload as not built")
        tree = [w.get("tree") for w in js["workloads"] if w["key"] == "python-json"]
        if real and tree != ["python3"]:
            problems.append(f"suite.json's process tree of python-json is {tree}")
        with open(page_path) as f:
            page = f.read()
        for needle in ("# roost benchmarks", "## Machine", "## Allocators", "## Summary",
                       "## Against the best peer", "| prodcons (1P/1C) | glibc |"):
            if needle not in page:
                problems.append(f"no `{needle}` in the docs page")
    except (OSError, ValueError, KeyError) as e:
        problems.append(f"output files: {e!r}")
    if problems:
        print(text)
        for p in problems:
            log(f"suite self-test: FAILED: {p}")
        log(f"suite self-test: outputs kept in {tmp}")
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"suite self-test: ok ({cases} cases x 2 allocators, tables, CSV, JSON and docs page; "
          "the real programs' inputs, checks and LD_DEBUG reading)")
    return 0

def make_parser():
    ap = argparse.ArgumentParser(description=DESCRIPTION)
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build", "release"),
                    help="where libroost.so and bench/bench_* are (default build/release)")
    ap.add_argument("--full", action="store_true",
                    help="every workload, thread sweeps (1,2,4,8,16), 7 reps")
    ap.add_argument("--workloads", default="",
                    help="comma-separated workload keys (shell patterns allowed); see --list")
    ap.add_argument("--allocators", default="",
                    help="comma-separated allocators (default: roost, glibc and every peer; "
                         "variants such as roost-nobatchit only by name; NAME@VAR=VALUE adds "
                         "an environment variable)")
    ap.add_argument("--roost-lib", action="append", default=[], metavar="NAME=PATH",
                    help="another roost library to run beside this tree's, e.g. one built at an "
                         "earlier commit: the allocator NAME (starting with roost-) preloads "
                         "PATH; name it in --allocators (repeatable)")
    ap.add_argument("--reps", type=int, default=None,
                    help="repetitions per case and allocator (default 3, --full 7)")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply every run's amount of work by this")
    ap.add_argument("--threads", default=None,
                    help="thread counts to sweep the multithreaded workloads over, e.g. 1,2,4,8 "
                         "(--full: 1,2,4,8,16; 'base' or '' for no sweep)")
    ap.add_argument("--no-install", action="store_true",
                    help="never install or build anything (peers, matplotlib)")
    ap.add_argument("--no-plots", action="store_true", help="do not draw plots")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds one run may take")
    ap.add_argument("--out-dir", default=os.path.join(REPO, "build", "bench"),
                    help="where CSV, JSON and plots go (default build/bench)")
    ap.add_argument("--peers-dir", default=os.path.join(REPO, "build", "peers"),
                    help="where the crate peers are built (default build/peers)")
    ap.add_argument("--docs", default=None, metavar="FILE",
                    help="also write the report as a Markdown page (plots in FILE's folder/bench/)")
    ap.add_argument("--list", action="store_true", help="list workloads and allocators, then exit")
    ap.add_argument("--self-test", action="store_true",
                    help="tiny run under glibc and roost checking tables, CSV, JSON and docs")
    ap.add_argument("--plot-json", help=argparse.SUPPRESS)
    ap.add_argument("--plot-dir", help=argparse.SUPPRESS)
    ap.add_argument("--plot-prefix", default="", help=argparse.SUPPRESS)
    return ap


def main(argv=None, table=None, name_files=True):
    """The suite's command; returns the exit status. table: the workload table (default: our
    programs' and the real programs'; the self-test passes its own); name_files: end with
    the list of the files written (on stderr, or in bench/run's list)."""
    table = WORKLOADS + programs.PROGRAMS if table is None else table
    ap = make_parser()
    opts = ap.parse_args(argv)

    if opts.plot_json:  # plotting in a python3 that has matplotlib (see make_plots)
        with open(opts.plot_json) as f:
            results = json.load(f)
        print(json.dumps(plots.plot_all(results, opts.plot_dir, opts.plot_prefix)))
        return 0
    if opts.self_test:
        return self_test(opts)
    try:
        return run(opts, ap, table, argv)
    finally:
        for w in table:  # the real programs' generated inputs
            if is_program(w):
                w.cleanup()
        if name_files:  # also when the run stops early: the peers it built, say
            list_written("suite")


def run(opts, ap, table, argv):
    """The run main() asks for: selection, runs, files, report; the exit status."""

    # --full: 7, so that a case keeps the 6 paired repetitions the standing's
    # 95 % interval needs (bench/suitelib/standing.py) with one run lost.
    reps = opts.reps if opts.reps is not None else (7 if opts.full else 3)
    if reps < 1:
        ap.error("--reps must be at least 1")
    if opts.scale <= 0:
        ap.error("--scale must be positive")
    threads = []
    if opts.threads is not None and opts.threads not in ("", "base"):
        try:
            threads = sorted({int(t) for t in parse_list(opts.threads)})
        except ValueError:
            ap.error("--threads takes comma-separated thread counts")
        if not threads or min(threads) < 1:
            ap.error("--threads: counts must be at least 1")
    elif opts.threads is None and opts.full:
        threads = list(DEFAULT_THREADS_FULL)

    build_dir = os.path.abspath(opts.build_dir)
    bindir = os.path.join(build_dir, "bench")
    try:
        workloads = select_workloads(table, parse_list(opts.workloads) if opts.workloads
                                     else None, opts.full)
    except ValueError as e:
        ap.error(f"unknown workload {e}; see --list")

    if opts.list:
        print_list(table, bindir)
        return 0

    named = set(parse_list(opts.workloads))
    cases = []
    for w in workloads:
        cases += make_cases(w, threads, opts.scale, named=w.key in named)
    not_built = programs.ensure_available(workloads, not opts.no_install)
    for w in workloads:
        if is_program(w):
            continue
        path = os.path.join(bindir, w.binary_name)
        if not os.access(path, os.X_OK):
            src = os.path.join(BENCH_DIR, w.program + ".c")
            not_built[w.key] = (f"{rel(path)} is missing"
                                + ("" if os.path.exists(src) else
                                   f" (no bench/{w.program}.c yet)"))
    kinds = {w.key: is_program(w) for w in workloads}
    for key, why in not_built.items():
        log(f"suite: workload {key} not {'available' if kinds[key] else 'built'}: {why}")

    extra_libs = parse_roost_libs(opts.roost_lib, ap.error)
    chosen = parse_list(opts.allocators) if opts.allocators else None
    if chosen:
        known = ({ROOST, GLIBC} | set(VARIANTS) | set(PEER_VARIANTS) | set(PEER_NAMES)
                 | set(extra_libs))
        bad = [a for a in chosen if a.partition("@")[0] not in known]
        if bad:
            ap.error(f"unknown allocator(s) {', '.join(bad)}; known: {', '.join(sorted(known))}")
    allocs = resolve_allocators(chosen, build_dir, not opts.no_install, opts.peers_dir,
                                extra_libs)
    byname = {a.name: a for a in allocs}

    broken = measure.check_runs([w for w in workloads if w.key not in not_built], allocs,
                                bindir, opts.timeout)
    alive = [a for a in allocs if not a.missing]
    for a in allocs:
        if a.missing:
            log(f"suite: allocator {a.name} missing: {a.missing}")
    if not alive:
        log("suite: no allocator could be run")
        return 1

    run_cases = [c for c in cases if c.wl.key not in not_built]
    total = sum(1 for _ in range(reps) for c in run_cases for a in alive
                if (c.wl.key, a.name) not in broken)
    log(f"suite: {len(run_cases)} cases x {len(alive)} allocators x {reps} reps = {total} runs "
        f"(interleaved); missing allocators: "
        f"{', '.join(a.name for a in allocs if a.missing) or 'none'}")
    loadavg_start = os.getloadavg()
    cpus = os.cpu_count() or 1
    if loadavg_start[0] >= cpus / 2:
        log(f"suite: the machine is busy (load average {loadavg_start[0]:.2f} on {cpus} CPUs): "
            f"every allocator runs beside the same load, but the runs take longer (about four "
            f"times on 2 cores beside a 2-core job) and their figures scatter more")
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    runs, elapsed = measure.run_all(run_cases, alive, broken, reps, bindir, opts.timeout, total)
    loadavg_end = os.getloadavg()

    errors = [f"{k} {n}: {why}" for (k, n), why in broken.items()]
    errors += [f"{r['case']} {r['allocator']} rep {r['rep']}: {r['reason']}"
               for r in runs if not r["ok"]]
    roost_failed = any(byname[n].roost_family or n == GLIBC for (_, n) in broken) or \
        any(not r["ok"] and (byname[r["allocator"]].roost_family or r["allocator"] == GLIBC)
            for r in runs)
    commit, dirty, subject = git_commit()
    cmdline = " ".join(["python3 bench/suite.py"] + list(sys.argv[1:] if argv is None else argv))
    results = {
        "date": date,
        "commit": {"commit": commit, "dirty": dirty, "subject": subject},
        "machine": machine_info(build_dir),
        "loadavg_start": loadavg_start, "loadavg_end": loadavg_end,
        "elapsed_s": elapsed,
        "subreaper": bool(measure.SUBREAPER),
        "config": {"reps": reps, "scale": opts.scale, "threads": list(threads),
                   "full": opts.full, "build_dir": rel(build_dir), "timeout_s": opts.timeout,
                   "command": os.environ.get("ROOST_SUITE_COMMAND") or cmdline},
        "allocators": [{"name": a.name, "library": a.shown, "env": a.env, "version": a.version,
                        "source": a.source, "missing": a.missing, "describe": a.describe()}
                       for a in allocs],
        "workloads": [{"key": w.key, "label": w.label, "program": w.program, "args": w.args,
                       "field": w.field, "work": w.work, "threads": w.threads,
                       "sweep": w.sweep, "live": w.live, "live_label": w.live_label,
                       "cpu": w.cpu, "stresses": w.stresses,
                       "kind": getattr(w, "kind", "bench"),
                       "tree": programs.tree_text(w) if is_program(w) else None,
                       "package": getattr(w, "package", None),
                       "system_libc": getattr(w, "system_libc", False)}
                      for w in workloads],
        "cases": [{"id": c.id, "wl": c.wl.key, "label": c.label, "short": c.short,
                   "args": c.args,
                   "threads": c.threads, "base": c.base, "program": c.wl.program,
                   "command": c.wl.command(c.args) if is_program(c.wl)
                   and c.wl.key not in not_built else None}
                  for c in cases],
        "not_built": not_built,
        "broken": [{"workload": k, "allocator": n, "reason": why}
                   for (k, n), why in broken.items()],
        "errors": errors,
        "runs": runs,
    }
    summary = report.summarize(results)
    results["summary"] = list(summary.values())
    json_path, runs_csv, sum_csv = report.write_files(results, summary, opts.out_dir)

    docs_links = None
    if opts.no_plots:
        results["plots_note"] = None
    else:
        docs_plot_dir = docs.prepare_plot_dir(opts.docs) if opts.docs else None
        made = plots.draw(results, json_path, opts.out_dir, docs_plot_dir, not opts.no_install)
        if made is not None:
            docs_links = docs.plot_links(made)

    print(report.render(results, summary), end="", flush=True)
    if opts.docs:
        docs.write_page(opts.docs, results, summary, docs_links or {})
    log(f"suite: done ({elapsed:.0f}s of runs)")
    if errors and not roost_failed:
        log("suite: only peers failed; exit status 0")
    return 1 if roost_failed else 0
