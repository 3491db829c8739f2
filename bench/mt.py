#!/usr/bin/env python3
"""bench/mt.py: multithreaded message-passing workloads, roost against glibc and its peers.

Runs bench_prodcons and bench_symmetric (build/<dir>/bench/) under every
allocator, swapped in with LD_PRELOAD (glibc: no preload; roost:
build/<dir>/libroost.so; mimalloc, jemalloc, tcmalloc and tbbmalloc: Debian's
packages, installed with apt-get when missing and running as root). Repetitions
are interleaved: repetition 1 runs every workload under every allocator, then
repetition 2, and so on, with the allocator order rotated each time, so a slow
phase of a shared machine hits every allocator alike. Throughput and wall time
come from the program's own report, peak RSS from os.wait4 (ru_maxrss). Every
run must pass the program's own verification and report that malloc came from
the expected shared object.

Prints Markdown tables on stdout (per workload, per allocator: median throughput
with min-max, median peak RSS with min-max, ratios to glibc and to the best),
progress on stderr, and writes build/bench/mt.csv (every run) and
build/bench/mt.json (configuration, allocators, summary). See bench/README.md.
"""

import argparse
import csv
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBDIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
           "/lib/x86_64-linux-gnu")

GLIBC = "glibc"
ROOST = "roost"

# Peers: (name, Debian package, shared object to preload). tbbmalloc's
# libtbbmalloc.so.2 only exports scalable_malloc & co.; the library that
# replaces malloc is its proxy, libtbbmalloc_proxy.so.2 (same package).
PEERS = [
    ("mimalloc", "libmimalloc2.0", "libmimalloc.so.2"),
    ("jemalloc", "libjemalloc2", "libjemalloc.so.2"),
    ("tcmalloc", "libtcmalloc-minimal4", "libtcmalloc_minimal.so.4"),
    ("tbbmalloc", "libtbbmalloc2", "libtbbmalloc_proxy.so.2"),
]

# Workloads: (key, label, program, arguments, throughput field in its output).
DEFAULT_WORKLOADS = [
    ("prodcons-1p1c", "prodcons 1P/1C, random 16..2048 B", "bench_prodcons",
     ["-p", "1", "-c", "1", "-n", "8000000"], "objects_per_sec"),
    ("prodcons-2p2c", "prodcons 2P/2C, random 16..2048 B", "bench_prodcons",
     ["-p", "2", "-c", "2", "-n", "4000000"], "objects_per_sec"),
    ("symmetric-4t", "symmetric 4 threads, random 16..2048 B", "bench_symmetric",
     ["-t", "4", "-r", "15000"], "ops_per_sec"),
]
FULL_WORKLOADS = DEFAULT_WORKLOADS + [
    ("prodcons-1p1c-64", "prodcons 1P/1C, fixed 64 B", "bench_prodcons",
     ["-p", "1", "-c", "1", "-n", "4000000", "-s", "64", "-S", "64"], "objects_per_sec"),
    ("prodcons-1p1c-1024", "prodcons 1P/1C, fixed 1024 B", "bench_prodcons",
     ["-p", "1", "-c", "1", "-n", "3000000", "-s", "1024", "-S", "1024"], "objects_per_sec"),
    ("prodcons-1p3c", "prodcons 1P/3C, random 16..2048 B", "bench_prodcons",
     ["-p", "1", "-c", "3", "-n", "3000000"], "objects_per_sec"),
    ("prodcons-3p1c", "prodcons 3P/1C, random 16..2048 B", "bench_prodcons",
     ["-p", "3", "-c", "1", "-n", "1000000"], "objects_per_sec"),
    ("prodcons-4p4c", "prodcons 4P/4C, random 16..2048 B", "bench_prodcons",
     ["-p", "4", "-c", "4", "-n", "750000"], "objects_per_sec"),
    ("prodcons-8p8c", "prodcons 8P/8C, random 16..2048 B", "bench_prodcons",
     ["-p", "8", "-c", "8", "-n", "400000"], "objects_per_sec"),
    ("prodcons-1p1c-b1", "prodcons 1P/1C, batch 1 (no batching), random 16..2048 B",
     "bench_prodcons", ["-p", "1", "-c", "1", "-n", "500000", "-b", "1", "-q", "4096"],
     "objects_per_sec"),
    ("symmetric-2t", "symmetric 2 threads, random 16..2048 B", "bench_symmetric",
     ["-t", "2", "-r", "12000"], "ops_per_sec"),
    ("symmetric-8t", "symmetric 8 threads, random 16..2048 B", "bench_symmetric",
     ["-t", "8", "-r", "3000"], "ops_per_sec"),
    ("symmetric-4t-64", "symmetric 4 threads, fixed 64 B", "bench_symmetric",
     ["-t", "4", "-r", "8000", "-s", "64", "-S", "64"], "ops_per_sec"),
    ("symmetric-4t-b1", "symmetric 4 threads, batch 1, random 16..2048 B", "bench_symmetric",
     ["-t", "4", "-r", "100000", "-b", "1"], "ops_per_sec"),
]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def rel(path):
    p = os.path.abspath(path)
    return os.path.relpath(p, REPO) if p.startswith(REPO + os.sep) else p


class Installer:
    """apt-get install on demand (root only); `apt-get update` at most once."""

    def __init__(self, enabled):
        self.enabled = enabled
        self.updated = None  # None: not tried; "" ok; else the failure

    def _run(self, cmd):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
        if r.returncode != 0:
            return f"`{' '.join(cmd)}` failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}"
        return None

    def install(self, package):
        """Returns None on success, else the reason it could not be installed."""
        if not self.enabled:
            return "not installed, and --no-install was given"
        if os.geteuid() != 0:
            return f"not installed, and not root to `apt-get install {package}`"
        if shutil.which("apt-get") is None:
            return f"not installed, and no apt-get to install {package}"
        if self.updated is None:
            log("mt: apt-get update")
            self.updated = self._run(["apt-get", "update", "-qq"]) or ""
        log(f"mt: installing {package} with apt-get")
        err = self._run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", package])
        if err and self.updated:
            err += f" (after {self.updated})"
        return err


def locate(soname):
    for d in LIBDIRS:
        p = os.path.join(d, soname)
        if os.path.exists(p):
            return p
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    except OSError:
        return None
    m = re.search(r"\s" + re.escape(soname) + r"\s.*=>\s*(\S+)", out)
    return m.group(1) if m else None


def package_version(package):
    if shutil.which("dpkg-query") is None:
        return None
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True,
                       text=True)
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


def glibc_version():
    r = subprocess.run(["ldd", "--version"], capture_output=True, text=True)
    m = re.search(r"(\d+\.\d+)\s*$", (r.stdout.splitlines() or [""])[0])
    return m.group(1) if m else None


def make_env(lib):
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "ROOST_STATS", "MALLOC_CONF", "MIMALLOC_SHOW_STATS",
              "MIMALLOC_VERBOSE"):
        env.pop(k, None)
    if lib is not None:
        env["LD_PRELOAD"] = os.path.abspath(lib)
    return env


def parse_report(stdout):
    """The program's key=value line as a dict (the last line that has bench=)."""
    for line in reversed(stdout.splitlines()):
        if "bench=" in line:
            return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
    return {}


def provider_ok(lib, provider):
    if not provider:
        return False
    if lib is None:
        return os.path.basename(provider).startswith("libc.so")
    return os.path.realpath(provider) == os.path.realpath(lib)


# ru_maxrss survives execve: a child forked from this (large) Python process
# starts with Python's resident set as its maximum, which would put a floor of
# ~16 MiB under every figure. So each run is started by a small shell that
# forks a subshell in the background and exits at once; this process is a
# child subreaper (prctl PR_SET_CHILD_SUBREAPER), so the orphaned subshell is
# re-parented here. (Its stdout is not the shell's, whose end of file this
# process waits for.) The subshell waits (reading a pipe) until the shell has
# exited, so the shell can never reap it, then execs the benchmark; os.wait4
# then returns the benchmark's own rusage, its maximum RSS starting from the
# few hundred KiB of the shell's fork. The preload is set on the benchmark
# only, not on the shell.
LAUNCH = """out=$1; err=$2; pre=$3; shift 3
exec 3<&0
{ read go <&3; if [ -n "$pre" ]; then export LD_PRELOAD="$pre"; fi
  exec "$@" >"$out" 2>"$err" </dev/null 3<&-; } </dev/null >/dev/null 2>&1 &
echo $!
"""
SUBREAPER = None


def become_subreaper():
    global SUBREAPER
    if SUBREAPER is None:
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            SUBREAPER = libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
        except (OSError, AttributeError):
            SUBREAPER = False
    return SUBREAPER


def run_once(binary, args, lib, timeout):
    """Runs one benchmark process. Returns a dict: ok, reason, report, maxrss_kib, wall_s."""
    with tempfile.TemporaryDirectory(prefix="roost-mt-") as tmp:
        outp, errp = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        t0 = time.monotonic()
        if become_subreaper():
            gate_r, gate_w = os.pipe()
            try:
                sh = subprocess.run(["/bin/sh", "-c", LAUNCH, "sh", outp, errp,
                                     os.path.abspath(lib) if lib else "", binary] + args,
                                    env=make_env(None), stdin=gate_r, stdout=subprocess.PIPE,
                                    text=True)
            finally:
                os.close(gate_r)
                os.close(gate_w)  # EOF on the pipe: the subshell goes on and execs
            pid = int(sh.stdout.strip())
        else:  # fallback: RSS figures include this process's RSS at fork
            with open(outp, "wb") as o, open(errp, "wb") as e:
                pid = subprocess.Popen([binary] + args, env=make_env(lib), stdout=o, stderr=e,
                                       stdin=subprocess.DEVNULL).pid
        status, usage, timed_out = None, None, False
        while True:
            wpid, st, ru = os.wait4(pid, os.WNOHANG)
            if wpid == pid:
                status, usage = st, ru
                break
            if time.monotonic() - t0 > timeout:
                os.kill(pid, 9)
                _, status, usage = os.wait4(pid, 0)
                timed_out = True
                break
            time.sleep(0.005)
        exit_code = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - t0
        with open(outp, errors="replace") as f:
            stdout = f.read()
        with open(errp, errors="replace") as f:
            stderr = f.read()
    rep = parse_report(stdout)
    res = {"ok": False, "reason": None, "report": rep, "maxrss_kib": usage.ru_maxrss,
           "wall_s": wall, "exit": exit_code}
    tail = (stderr.strip().splitlines() or [""])[-1][:200]
    if timed_out:
        res["reason"] = f"timed out after {timeout} s"
    elif exit_code != 0:
        res["reason"] = f"exit {exit_code}" + (f": {tail}" if tail else "")
    elif rep.get("verify") != "ok":
        res["reason"] = "no verify=ok in the output" + (f": {tail}" if tail else "")
    elif not provider_ok(lib, rep.get("malloc_from")):
        res["reason"] = f"preload not in effect: malloc from {rep.get('malloc_from')}"
    else:
        res["ok"] = True
    return res


def fmt_rate(x):
    return f"{x / 1e6:.2f}"


def fmt_mib(kib):
    return f"{kib / 1024:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build", "release"))
    ap.add_argument("--reps", type=int, default=None,
                    help="repetitions per workload and allocator (default 5, --full 7)")
    ap.add_argument("--full", action="store_true",
                    help="more workloads (thread counts, fixed sizes, no batching) and reps")
    ap.add_argument("--workloads", default="",
                    help="comma-separated workload keys to run (default: all of the set)")
    ap.add_argument("--allocators", default="",
                    help="comma-separated allocators (default: roost,glibc and every peer)")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply every run's amount of work (-n / -r) by this")
    ap.add_argument("--no-install", action="store_true", help="never apt-get install peers")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    ap.add_argument("--out-dir", default=os.path.join(REPO, "build", "bench"))
    ap.add_argument("--list", action="store_true", help="list the workloads and exit")
    opts = ap.parse_args()
    reps = opts.reps if opts.reps is not None else (7 if opts.full else 5)
    if reps < 1:
        ap.error("--reps must be at least 1")

    workloads = FULL_WORKLOADS if opts.full else DEFAULT_WORKLOADS
    if opts.list:
        for key, label, prog, args, _ in FULL_WORKLOADS:
            default = "default" if any(k == key for k, *_ in DEFAULT_WORKLOADS) else "--full"
            print(f"{key:22} {default:8} {prog} {' '.join(args)}   ({label})")
        return 0
    if opts.workloads:
        want = [w.strip() for w in opts.workloads.split(",") if w.strip()]
        known = {k: (k, l, p, a, f) for k, l, p, a, f in FULL_WORKLOADS}
        bad = [w for w in want if w not in known]
        if bad:
            ap.error(f"unknown workload(s) {', '.join(bad)}; see --list")
        workloads = [known[w] for w in want]
    if opts.scale != 1.0:
        scaled = []
        for key, label, prog, args, field in workloads:
            args = list(args)
            for flag in ("-n", "-r"):
                if flag in args:
                    i = args.index(flag) + 1
                    args[i] = str(max(1, int(int(args[i]) * opts.scale)))
            scaled.append((key, label, prog, args, field))
        workloads = scaled

    bindir = os.path.join(opts.build_dir, "bench")
    binaries = {}
    for prog in sorted({w[2] for w in workloads}):
        path = os.path.join(bindir, prog)
        if not os.access(path, os.X_OK):
            log(f"mt: {rel(path)} is not built (run `make release` or `bash bench/run`)")
            return 1
        binaries[prog] = path

    # Allocators, in table order: name -> library (None = glibc); missing: name -> reason.
    order = [ROOST, GLIBC] + [p[0] for p in PEERS]
    if opts.allocators:
        chosen = [a.strip() for a in opts.allocators.split(",") if a.strip()]
        bad = [a for a in chosen if a not in order]
        if bad:
            ap.error(f"unknown allocator(s) {', '.join(bad)}; known: {', '.join(order)}")
        order = [a for a in order if a in chosen]
    libs, missing, descr = {}, {}, {}
    installer = Installer(not opts.no_install)
    for name in order:
        if name == GLIBC:
            libs[name] = None
            descr[name] = f"glibc {glibc_version() or '?'} (no preload)"
        elif name == ROOST:
            lib = os.path.join(opts.build_dir, "libroost.so")
            if os.path.exists(lib):
                libs[name] = lib
                descr[name] = f"LD_PRELOAD={rel(lib)}"
            else:
                missing[name] = f"{rel(lib)} is not built"
        else:
            _, package, soname = next(p for p in PEERS if p[0] == name)
            path = locate(soname)
            reason = None
            if path is None:
                reason = installer.install(package)
                path = locate(soname)
            if path is None:
                missing[name] = f"{soname} not found: " + (reason or f"{package} has no {soname}")
                continue
            libs[name] = path
            ver = package_version(package)
            descr[name] = f"LD_PRELOAD={path} (Debian {package} {ver or '?'})"

    # The preload must take effect: a tiny run of each program under each allocator.
    for name in list(libs):
        for prog, path in binaries.items():
            small = ["-n", "2000"] if prog == "bench_prodcons" else ["-r", "20"]
            r = run_once(path, small, libs[name], 60)
            if not r["ok"]:
                missing[name] = f"check run of {prog} failed: {r['reason']}"
                del libs[name]
                break
    alive = [n for n in order if n in libs]
    if not alive:
        log("mt: no allocator could be run")
        return 1

    host = {
        "cpus": os.cpu_count(),
        "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                     if l.startswith("model name")), platform.processor()) if
        os.path.exists("/proc/cpuinfo") else platform.processor(),
        "kernel": platform.release(),
        "loadavg_start": os.getloadavg(),
    }
    try:
        commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no",
                                "--", "src", "include", "CMakeLists.txt"],
                               capture_output=True, text=True).stdout.strip() != ""
    except OSError:
        commit, dirty = "", False

    total = reps * len(workloads) * len(alive)
    log(f"mt: {len(workloads)} workloads x {len(alive)} allocators x {reps} reps = {total} runs "
        f"(interleaved); missing: {', '.join(missing) or 'none'}")
    runs = []  # dicts, one per run
    t_start = time.time()
    done = 0
    for rep in range(reps):
        rot = rep % len(alive)
        rep_order = alive[rot:] + alive[:rot]
        for key, label, prog, args, field in workloads:
            for name in rep_order:
                r = run_once(binaries[prog], args, libs[name], opts.timeout)
                rep_d = r["report"]
                row = {"workload": key, "label": label, "allocator": name, "rep": rep + 1,
                       "ok": r["ok"], "reason": r["reason"] or "",
                       "throughput": float(rep_d.get(field, "nan")) if r["ok"] else None,
                       "seconds": float(rep_d.get("seconds", "nan")) if r["ok"] else None,
                       "maxrss_kib": r["maxrss_kib"],
                       "vmhwm_kib": int(rep_d.get("vmhwm_kib", "-1") or -1),
                       "process_wall_s": round(r["wall_s"], 4),
                       "objects": int(rep_d.get("objects", "0") or 0),
                       "command": " ".join([rel(binaries[prog])] + args),
                       "preload": rel(libs[name]) if libs[name] else "",
                       "malloc_from": rep_d.get("malloc_from", "")}
                runs.append(row)
                done += 1
                what = (f"{fmt_rate(row['throughput'])} M/s, {row['seconds']:.3f} s, "
                        f"{fmt_mib(row['maxrss_kib'])} MiB" if r["ok"] else "FAILED: " + r["reason"])
                log(f"  [{done}/{total}] rep {rep + 1} {key} {name}: {what} "
                    f"({time.time() - t_start:.0f}s)")
    host["loadavg_end"] = os.getloadavg()
    elapsed = time.time() - t_start

    # Summaries.
    summary = {}
    errors = []
    for key, label, prog, args, field in workloads:
        for name in alive:
            rs = [r for r in runs if r["workload"] == key and r["allocator"] == name]
            good = [r for r in rs if r["ok"]]
            bad = [r for r in rs if not r["ok"]]
            for r in bad:
                errors.append(f"{key} {name} rep {r['rep']}: {r['reason']}")
            s = {"runs": len(rs), "failed": len(bad)}
            if good:
                tp = [r["throughput"] for r in good]
                rss = [r["maxrss_kib"] for r in good]
                secs = [r["seconds"] for r in good]
                s.update(tp_median=statistics.median(tp), tp_min=min(tp), tp_max=max(tp),
                         rss_median_kib=statistics.median(rss), rss_min_kib=min(rss),
                         rss_max_kib=max(rss), seconds_median=statistics.median(secs))
            summary[(key, name)] = s

    out = []
    out.append("## Multithreaded workloads: throughput and peak RSS")
    out.append("")
    out.append(f"Medians of {reps} interleaved repetitions (min–max in brackets). Throughput in "
               "millions of objects per second (each object: one `malloc` by one thread, one "
               "`free` by another), higher is better; peak RSS of the whole process "
               "(`ru_maxrss`), lower is better. Ratios compare medians: throughput / glibc's and "
               "/ the best's; RSS / glibc's and / the lowest.")
    for key, label, prog, args, field in workloads:
        out.append("")
        out.append(f"### {label}")
        out.append("")
        out.append(f"`{prog} {' '.join(args)}`")
        out.append("")
        out.append("| allocator | Mobj/s median (min–max) | × glibc | × best | peak RSS MiB median "
                   "(min–max) | × glibc | × lowest |")
        out.append("|---|---:|---:|---:|---:|---:|---:|")
        meds = {n: summary[(key, n)] for n in alive if "tp_median" in summary[(key, n)]}
        best_tp = max((s["tp_median"] for s in meds.values()), default=None)
        best_rss = min((s["rss_median_kib"] for s in meds.values()), default=None)
        g = meds.get(GLIBC)
        for name in order:
            if name in missing:
                out.append(f"| {name} | missing | | | missing | | |")
                continue
            s = summary[(key, name)]
            if "tp_median" not in s:
                out.append(f"| {name} | error | | | error | | |")
                continue
            note = f" ({s['failed']}/{s['runs']} runs failed)" if s["failed"] else ""
            tp = (f"{fmt_rate(s['tp_median'])} ({fmt_rate(s['tp_min'])}–"
                  f"{fmt_rate(s['tp_max'])}){note}")
            rss = (f"{fmt_mib(s['rss_median_kib'])} ({fmt_mib(s['rss_min_kib'])}–"
                   f"{fmt_mib(s['rss_max_kib'])})")
            tg = f"{s['tp_median'] / g['tp_median']:.2f}" if g else "n/a"
            tb = f"{s['tp_median'] / best_tp:.2f}"
            rg = f"{s['rss_median_kib'] / g['rss_median_kib']:.2f}" if g else "n/a"
            rb = f"{s['rss_median_kib'] / best_rss:.2f}"
            bold = "**" if name == ROOST else ""
            out.append(f"| {bold}{name}{bold} | {tp} | {tg} | {tb} | {rss} | {rg} | {rb} |")

    # One-line overview: roost against each other allocator, per workload.
    if ROOST in alive and len(alive) > 1:
        others = [n for n in order if n != ROOST]
        out.append("")
        out.append("### roost's throughput relative to each allocator (median / median; > 1: "
                   "roost faster)")
        out.append("")
        out.append("| workload | " + " | ".join(others) + " |")
        out.append("|---|" + "---:|" * len(others))
        for key, label, prog, args, field in workloads:
            rs = summary[(key, ROOST)]
            cells = []
            for n in others:
                o = summary.get((key, n), {})
                if n in missing:
                    cells.append("missing")
                elif "tp_median" in rs and "tp_median" in o:
                    cells.append(f"{rs['tp_median'] / o['tp_median']:.2f}")
                else:
                    cells.append("error")
            out.append(f"| {label} | " + " | ".join(cells) + " |")

    out.append("")
    for name in order:
        if name in missing:
            out.append(f"- {name}: **missing**: {missing[name]}")
        else:
            out.append(f"- {name}: {descr[name]}")
    la0, la1 = host["loadavg_start"], host["loadavg_end"]
    out.append(f"- machine: {host['cpus']} CPUs ({host['cpu']}), Linux {host['kernel']}; "
               f"load average {la0[0]:.2f} before, {la1[0]:.2f} after (1-minute); "
               f"{total} runs in {elapsed:.0f} s")
    # Cross-check: the kernel's ru_maxrss (os.wait4) against the program's own
    # VmHWM read just before it exits (equal unless memory grew during exit).
    diffs = [r["maxrss_kib"] - r["vmhwm_kib"] for r in runs if r["ok"] and r["vmhwm_kib"] >= 0]
    how = ("a subreaper-launched child, so it is the benchmark's own peak" if SUBREAPER else
           "a direct child: WARNING, the figures include this runner's RSS at fork")
    if diffs:
        out.append(f"- peak RSS: `ru_maxrss` from `os.wait4` of {how}; it matches the program's "
                   f"own VmHWM within {min(diffs)}..{max(diffs)} KiB over all runs")
    if commit:
        out.append(f"- roost at commit {commit}"
                   + (" plus uncommitted changes under src/ include/" if dirty else ""))
    out.append("- every run passed its own verification (object count and checksum) and "
               "reported `malloc` from the preloaded library" if not errors else
               f"- {len(errors)} run(s) failed:")
    for e in errors:
        out.append(f"  - {e}")
    print("\n".join(out), flush=True)

    os.makedirs(opts.out_dir, exist_ok=True)
    csv_path = os.path.join(opts.out_dir, "mt.csv")
    with open(csv_path, "w", newline="") as f:
        cols = ["workload", "label", "allocator", "rep", "ok", "reason", "throughput", "seconds",
                "maxrss_kib", "vmhwm_kib", "process_wall_s", "objects", "preload", "malloc_from", "command"]
        wr = csv.DictWriter(f, fieldnames=cols)
        wr.writeheader()
        for r in runs:
            wr.writerow({c: r[c] for c in cols})
    json_path = os.path.join(opts.out_dir, "mt.json")
    with open(json_path, "w") as f:
        json.dump({
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "commit": commit, "src_dirty": dirty, "host": host, "reps": reps,
            "elapsed_s": elapsed,
            "allocators": {n: {"library": libs.get(n), "description": descr.get(n),
                               "missing": missing.get(n)} for n in order},
            "workloads": [{"key": k, "label": l, "program": p, "args": a, "metric": fl}
                          for k, l, p, a, fl in workloads],
            "summary": [dict(workload=k, allocator=n, **s) for (k, n), s in summary.items()],
            "runs": runs,
        }, f, indent=1)
    log(f"mt: wrote {rel(csv_path)} and {rel(json_path)} ({elapsed:.0f}s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
