#!/usr/bin/env python3
"""bench/suite.py: the benchmark suite, roost against every allocator a user would pick instead.

Runs the workload programs (build/<dir>/bench/bench_*) under every allocator,
swapped in with LD_PRELOAD: roost (build/<dir>/libroost.so), glibc (no
preload) and the peers that bench/peers.py provides (Debian's mimalloc,
jemalloc, tcmalloc and tbbmalloc; snmalloc and mimalloc v2/v3 built from their
Rust -sys crates), plus opt-in roost variants (roost-nobatchit, roost-secure,
...). Repetitions are interleaved: repetition 1 runs every case under every
allocator, then repetition 2, and so on, with the allocator order rotated each
time, so a slow phase of a shared machine hits every allocator alike. The
figure (a higher-is-better throughput) and the wall time come from the
program's own report line, the peak RSS from os.wait4 (ru_maxrss) of a
subreaper-launched child. Every run must pass the program's own verification
(verify=ok, exit 0) and report that malloc came from the expected shared
object (malloc_from=).

Prints Markdown tables on stdout (per case, per allocator: median figure with
min-max, median peak RSS with min-max, ratios to the best; then each
allocator's figure relative to roost for every case, with geometric means),
progress on stderr, and writes build/bench/suite-runs.csv (every run),
build/bench/suite-summary.csv, build/bench/suite.json (configuration, machine,
allocators and their versions, roost commit, summary, runs) and, with
matplotlib, plots (throughput against thread count for each swept workload;
time relative to the best, one group per workload). --docs FILE writes the
whole report as a Markdown page with the plots beside it (FILE's folder/bench/).
See bench/README.md.
"""

import argparse
import csv
import fnmatch
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

ROOST = "roost"
GLIBC = "glibc"

# The peers bench/peers.py knows, in its order (used for --list and to check
# --allocators; a name peers.py returns that is not here is taken as well).
PEER_NAMES = ["mimalloc", "jemalloc", "tcmalloc", "tbbmalloc", "snmalloc", "mimalloc-v2",
              "mimalloc-v3"]

# roost variants, opt-in by name (never in the default set): name -> (library
# file in the build directory, extra environment, what it is).
VARIANTS = {
    "roost-nobatchit": ("libroost.so", {"ROOST_BATCHIT": "0"},
                        "libroost.so with ROOST_BATCHIT=0 (remote frees not batched)"),
    "roost-noreserve": ("libroost.so", {"ROOST_SLAB_RESERVE": "0"},
                        "libroost.so with ROOST_SLAB_RESERVE=0 (no per-thread cache of "
                        "empty slabs)"),
    "roost-secure": ("libroost-secure.so", {}, "the hardened build, libroost-secure.so"),
}

# Environment variables removed from every run, so each allocator runs in its
# default configuration (a variant sets what it needs on top).
SCRUB_PREFIXES = ("ROOST_", "MIMALLOC_", "TCMALLOC_", "SNMALLOC_", "TBB_")
SCRUB_NAMES = ("LD_PRELOAD", "MALLOC_CONF", "_RJEM_MALLOC_CONF", "GLIBC_TUNABLES",
               "MALLOC_ARENA_MAX", "MALLOC_TOP_PAD_", "MALLOC_TRIM_THRESHOLD_",
               "MALLOC_MMAP_THRESHOLD_")

# Units of the figure fields: field -> what one unit of work is.
UNITS = {"objects_per_sec": "objects/s", "msgs_per_sec": "msgs/s", "ops_per_sec": "ops/s",
         "writes_per_sec": "writes/s"}

DEFAULT_THREADS_FULL = [1, 2, 4, 8, 16]
# In a thread sweep every case does this fraction of the base configuration's
# total work (the same at every thread count), so that a sweep of five counts
# costs about 2.5 base runs.
SWEEP_WORK = 0.5


class Workload:
    """One entry of the workload table.

    args: the base command line (flags of spec.md). field: the figure in the
    report line (higher is better). work: the flag whose value is the amount of
    work per thread (scaled by --scale; in a sweep, scaled so that every count
    does SWEEP_WORK x the base configuration's total work). threads: "t" (-t N
    threads), "pc" (-p N -c N: N producer/consumer pairs) or None (no thread
    parameter). sets: "default" and/or "full". sweep: swept when thread counts
    are given (--full, --threads); a workload with a thread parameter but
    sweep=False is swept only when named in --workloads. min_threads: the
    smallest count the program takes. live: a field of the report with the
    program's peak live KiB (frag), shown next to the peak RSS. stresses: one
    line for the tables.
    """

    def __init__(self, key, label, program, args, field, work, threads=None, sets=("full",),
                 sweep=None, min_threads=1, live=None, stresses=""):
        self.key, self.label, self.program = key, label, program
        self.args, self.field, self.work, self.threads = list(args), field, work, threads
        self.sets = sets
        self.sweep = (threads is not None) if sweep is None else sweep
        self.min_threads, self.live, self.stresses = min_threads, live, stresses

    @property
    def binary_name(self):
        return "bench_" + self.program

    def base_threads(self):
        if self.threads == "t":
            return int(arg_value(self.args, "-t"))
        if self.threads == "pc":
            return int(arg_value(self.args, "-p"))
        return None


def arg_value(args, flag):
    i = args.index(flag)
    return args[i + 1]


def set_arg(args, flag, value):
    args = list(args)
    if flag in args:
        args[args.index(flag) + 1] = str(value)
    else:
        args += [flag, str(value)]
    return args


def parse_count(s):
    """A count with an optional k/m suffix (the programs' BenchParseU64)."""
    m = re.fullmatch(r"(\d+)([kKmM]?)", s)
    if not m:
        raise ValueError(s)
    return int(m.group(1)) * {"": 1, "k": 1000, "K": 1000, "m": 10**6, "M": 10**6}[m.group(2)]


def thread_desc(args):
    if "-p" in args and "-c" in args:
        return f"{arg_value(args, '-p')}P/{arg_value(args, '-c')}C"
    if "-t" in args:
        t = arg_value(args, "-t")
        return f"{t} thread" + ("" if t == "1" else "s")
    return ""


R = "random 16..2048 B"
# The table: every program of the suite. Work amounts aim at about one second
# per run for a typical allocator on 2 cores (figures measured with the runner
# on the 2-core development VM; see bench/README.md).
WORKLOADS = [
    # --- message passing: every free is remote ---------------------------------------------
    Workload("prodcons", f"prodcons, {R}, batches of 256", "prodcons",
             ["-p", "2", "-c", "2", "-n", "2500000"], "objects_per_sec", "-n", threads="pc",
             sets=("default", "full"),
             stresses="producers only allocate, consumers only free (bounded queue)"),
    Workload("prodcons-1p3c", f"prodcons, {R}, batches of 256", "prodcons",
             ["-p", "1", "-c", "3", "-n", "3000000"], "objects_per_sec", "-n",
             stresses="one producer feeding three consumers"),
    Workload("prodcons-3p1c", f"prodcons, {R}, batches of 256", "prodcons",
             ["-p", "3", "-c", "1", "-n", "1000000"], "objects_per_sec", "-n",
             stresses="three producers, one consumer frees for all"),
    Workload("prodcons-64", "prodcons, fixed 64 B, batches of 256", "prodcons",
             ["-p", "1", "-c", "1", "-n", "5000000", "-s", "64", "-S", "64"],
             "objects_per_sec", "-n", stresses="one size class only"),
    Workload("prodcons-b1", f"prodcons, {R}, batch 1 (no batching)", "prodcons",
             ["-p", "1", "-c", "1", "-n", "500000", "-b", "1", "-q", "4096"],
             "objects_per_sec", "-n", stresses="hand-off of single objects"),
    Workload("msgpass", "msgpass (BatchIt §4.3), 4 sizes, batches of 1..16, 4096 in flight",
             "msgpass",
             ["-p", "1", "-c", "1", "-n", "4000000"], "msgs_per_sec", "-n", threads="pc",
             sets=("default", "full"),
             stresses="batches of one size sent to random consumers, bounded in flight"),
    Workload("xmalloc", "xmalloc, random 16..2048 B, blocks of 64, unbounded", "xmalloc",
             ["-p", "2", "-c", "2", "-n", "1000000"], "objects_per_sec", "-n", threads="pc",
             sets=("default", "full"),
             stresses="producer/consumer with no back-pressure: memory in flight grows"),
    Workload("symmetric", f"symmetric swap, {R}, batches of 256", "symmetric",
             ["-t", "4", "-r", "6000"], "ops_per_sec", "-r", threads="t", min_threads=2,
             sets=("default", "full"),
             stresses="threads swap what they allocate: remote frees a thread cache can reuse"),
    Workload("symmetric-64", "symmetric swap, fixed 64 B, batches of 256", "symmetric",
             ["-t", "4", "-r", "6000", "-s", "64", "-S", "64"], "ops_per_sec", "-r",
             stresses="one size class only"),
    Workload("symmetric-b1", f"symmetric swap, {R}, batch 1", "symmetric",
             ["-t", "4", "-r", "100000", "-b", "1"], "ops_per_sec", "-r",
             stresses="exchange of single objects"),
    # --- classic multithreaded allocator benchmarks -------------------------------------------
    Workload("larson", "larson server simulation, 16..1024 B", "larson",
             ["-t", "4", "-g", "20", "-n", "150000"], "ops_per_sec", "-n", threads="t",
             sets=("default", "full"),
             stresses="objects freed by threads that did not allocate them, long-lived slots"),
    Workload("threadtest", "threadtest, 64 B", "threadtest",
             ["-t", "4", "-i", "500", "-n", "10000"], "ops_per_sec", "-i", threads="t",
             sets=("default", "full"), stresses="thread-local allocate-all then free-all"),
    Workload("linuxscal", "linux-scalability, 64 B", "linuxscal",
             ["-t", "4", "-n", "8000000"], "ops_per_sec", "-n", threads="t",
             stresses="thread-local immediate malloc/free pairs"),
    Workload("cachescratch", "cache-scratch (passive false sharing), 8 B", "cachescratch",
             ["-t", "4", "-i", "100000", "-w", "400"], "writes_per_sec", "-i", threads="t",
             stresses="objects handed out by one thread, freed and reused by others"),
    Workload("cachethrash", "cache-thrash (active false sharing), 8 B", "cachethrash",
             ["-t", "4", "-i", "100000", "-w", "400"], "writes_per_sec", "-i", threads="t",
             stresses="small objects of different threads on one cache line"),
    # --- single-thread-ish: memory shape ------------------------------------------------------
    Workload("frag", "fragmentation (phases, random lifetimes), 64 MiB live", "frag",
             ["-t", "1", "-n", "3000000"], "ops_per_sec", "-n", threads="t", sweep=False,
             live="peak_live_kib", sets=("default", "full"),
             stresses="shifting size distributions; peak RSS against peak live bytes"),
    Workload("realloc", "realloc-heavy (growing and shrinking buffers)", "realloc",
             ["-t", "2", "-n", "800000"], "ops_per_sec", "-n", threads="t", sweep=False,
             sets=("default", "full"), stresses="in-place growth, copies, size-class moves"),
    Workload("large", "large objects, 1..64 MiB", "large",
             ["-t", "2", "-n", "1200"], "ops_per_sec", "-n", threads="t", sweep=False,
             sets=("default", "full"), stresses="mmap/munmap, page faults, large-object caches"),
]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def rel(path):
    p = os.path.abspath(path)
    return os.path.relpath(p, REPO) if p.startswith(REPO + os.sep) else p


# ----------------------------------------------------------------------------------------------
# Cases: a workload at one thread count with its final command line.

class Case:
    def __init__(self, wl, args, threads, base):
        self.wl, self.args, self.threads, self.base = wl, args, threads, base
        self.id = wl.key if threads is None or base else f"{wl.key}@{threads}"
        td = thread_desc(args)
        self.label = f"{wl.label}, {td}" if td else wl.label
        self.short = f"{wl.key} ({td})" if td else wl.key


def make_cases(wl, threads_list, scale, named=False):
    """The cases of one workload: its base configuration, or one per thread count.

    A workload is swept when thread counts are given and it has a thread
    parameter and either is marked for sweeps or was named in --workloads."""
    base_t = wl.base_threads()
    counts = [None]
    if threads_list and wl.threads is not None and (wl.sweep or named):
        counts = sorted({t for t in threads_list if t >= wl.min_threads} | {base_t})
        if len(counts) == 1:
            counts = [None]
    cases = []
    for t in counts:
        args = list(wl.args)
        factor = 1.0
        if t is not None:
            if wl.threads == "t":
                args = set_arg(args, "-t", t)
            else:
                args = set_arg(set_arg(args, "-p", t), "-c", t)
            factor = SWEEP_WORK * base_t / t  # the same total work at every count
        work = parse_count(arg_value(args, wl.work))
        args = set_arg(args, wl.work, max(1, int(round(work * factor * scale))))
        cases.append(Case(wl, args, t, t is None or t == base_t))
    sweep = len(cases) > 1
    for c in cases:  # in a sweep every case names its thread count
        if sweep:
            c.id = f"{wl.key}@{c.threads}"
    return cases


def tiny_args(wl):
    """A very short run of the workload (the preload check)."""
    work = parse_count(arg_value(wl.args, wl.work))
    small = {"-n": 2000, "-r": 20, "-i": 5}.get(wl.work, 100)
    if wl.program == "large":
        small = 20
    return set_arg(wl.args, wl.work, min(work, small))


# ----------------------------------------------------------------------------------------------
# Allocators.

class Allocator:
    def __init__(self, name, lib=None, env=None, version="", source="", missing=None):
        self.name, self.lib, self.env = name, lib, dict(env or {})
        self.version, self.source, self.missing = version, source, missing

    @property
    def roost_family(self):
        return self.name == ROOST or self.name.startswith(ROOST + "-") or \
            self.name.startswith(ROOST + "@")

    def describe(self):
        parts = []
        if self.lib:
            parts.append(f"`LD_PRELOAD={rel(self.lib)}`")
        else:
            parts.append("no preload")
        if self.env:
            parts.append(" ".join(f"`{k}={v}`" for k, v in sorted(self.env.items())))
        return ", ".join(parts)


def glibc_version():
    try:
        r = subprocess.run(["ldd", "--version"], capture_output=True, text=True)
    except OSError:
        return "?"
    m = re.search(r"(\d+\.\d+)\s*$", (r.stdout.splitlines() or [""])[0])
    return m.group(1) if m else "?"


def git_commit():
    try:
        commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain",
                                "--untracked-files=no", "--", "src", "include",
                                "CMakeLists.txt"],
                               capture_output=True, text=True).stdout.strip() != ""
        subject = subprocess.run(["git", "-C", REPO, "log", "-1", "--format=%s"],
                                 capture_output=True, text=True).stdout.strip()
    except OSError:
        return "", False, ""
    return commit, dirty, subject


def peer_module_names():
    """PEER_NAMES of bench/peers.py, when it exists and says."""
    if not os.path.exists(os.path.join(HERE, "peers.py")):
        return []
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    sys.dont_write_bytecode = True  # no bench/__pycache__
    try:
        import peers
        return list(getattr(peers, "PEER_NAMES", []))
    except Exception:
        return []


def load_peers(names, install, build_root):
    """Calls bench/peers.py's ensure_peers; name -> dict (lib, version, source | missing)."""
    path = os.path.join(HERE, "peers.py")
    want = names if names is not None else PEER_NAMES
    if not os.path.exists(path):
        return {n: {"missing": "bench/peers.py not present"} for n in want}
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    sys.dont_write_bytecode = True  # no bench/__pycache__
    try:
        import peers  # noqa: E402  (bench/peers.py)
    except Exception as e:  # a broken helper must not stop the suite
        return {n: {"missing": f"bench/peers.py does not import: {e!r}"} for n in want}
    try:
        got = peers.ensure_peers(build_root=build_root, names=names, install=install,
                                 log=sys.stderr)
    except Exception as e:
        return {n: {"missing": f"bench/peers.py ensure_peers failed: {e!r}"} for n in want}
    out = dict(got)
    for n in want:
        if n not in out:
            out[n] = {"missing": "bench/peers.py did not return it"}
    return out


def resolve_allocators(chosen, build_dir, install, peers_dir):
    """Allocators in table order. chosen: list of names, or None for the default set."""
    names = chosen
    commit, dirty, _ = git_commit()
    roost_version = (commit or "?") + ("+dirty" if dirty else "")

    def roost_like(name, libfile, env, what):
        lib = os.path.join(build_dir, libfile)
        if not os.path.exists(lib):
            return Allocator(name, env=env, missing=f"{rel(lib)} is not built")
        return Allocator(name, lib, env, roost_version, what)

    def one(name, peers):
        base, _, envspec = name.partition("@")
        extra = {}
        if envspec:
            for kv in envspec.split("@"):
                k, _, v = kv.partition("=")
                extra[k] = v
        if base == ROOST:
            a = roost_like(name, "libroost.so", extra, "this repository")
        elif base in VARIANTS:
            libfile, env, what = VARIANTS[base]
            a = roost_like(name, libfile, dict(env, **extra), what)
        elif base == GLIBC:
            a = Allocator(name, None, extra, glibc_version(), "the C library (no preload)")
        else:
            p = peers.get(base) or {"missing": "unknown to bench/peers.py"}
            if p.get("missing") or not p.get("lib"):
                a = Allocator(name, env=extra, missing=p.get("missing") or "no library")
            else:
                a = Allocator(name, p["lib"], extra, p.get("version", "?"), p.get("source", ""))
        return a

    if names is None:
        peers = load_peers(None, install, peers_dir)
        order = [ROOST, GLIBC] + list(peers)
        for n in PEER_NAMES:
            if n not in order:
                order.append(n)
    else:
        peer_names = []
        for n in names:
            base = n.partition("@")[0]
            if base not in (ROOST, GLIBC) and base not in VARIANTS and base not in peer_names:
                peer_names.append(base)
        peers = load_peers(peer_names, install, peers_dir) if peer_names else {}
        order = names
    return [one(n, peers) for n in order]


# ----------------------------------------------------------------------------------------------
# Running one process.

def make_env(extra):
    env = {k: v for k, v in os.environ.items()
           if k not in SCRUB_NAMES and not k.startswith(SCRUB_PREFIXES)}
    env.update(extra or {})
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


def run_once(binary, args, alloc, timeout):
    """Runs one benchmark process. Returns a dict: ok, reason, report, maxrss_kib, wall_s."""
    lib = alloc.lib
    with tempfile.TemporaryDirectory(prefix="roost-suite-") as tmp:
        outp, errp = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        t0 = time.monotonic()
        if become_subreaper():
            gate_r, gate_w = os.pipe()
            try:
                sh = subprocess.run(["/bin/sh", "-c", LAUNCH, "sh", outp, errp,
                                     os.path.abspath(lib) if lib else "", binary] + args,
                                    env=make_env(alloc.env), stdin=gate_r,
                                    stdout=subprocess.PIPE, text=True)
            finally:
                os.close(gate_r)
                os.close(gate_w)  # EOF on the pipe: the subshell goes on and execs
            pid = int(sh.stdout.strip())
        else:  # fallback: RSS figures include this process's RSS at fork
            env = make_env(alloc.env)
            if lib:
                env["LD_PRELOAD"] = os.path.abspath(lib)
            with open(outp, "wb") as o, open(errp, "wb") as e:
                pid = subprocess.Popen([binary] + args, env=env, stdout=o, stderr=e,
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
           "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "exit": exit_code}
    tail = (stderr.strip().splitlines() or [""])[-1][:200]
    if timed_out:
        res["reason"] = f"timed out after {timeout:g} s"
    elif exit_code != 0:
        sig = f" (signal {-exit_code})" if exit_code < 0 else ""
        res["reason"] = f"exit {exit_code}{sig}" + (f": {tail}" if tail else "")
    elif rep.get("verify") != "ok":
        res["reason"] = "no verify=ok in the output" + (f": {tail}" if tail else "")
    elif not provider_ok(lib, rep.get("malloc_from")):
        res["reason"] = f"preload not in effect: malloc from {rep.get('malloc_from')}"
        res["preload_failed"] = True
    else:
        res["ok"] = True
    return res


def to_float(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


# ----------------------------------------------------------------------------------------------
# The machine.

def read_first(path, pattern):
    try:
        with open(path) as f:
            for line in f:
                m = re.match(pattern, line)
                if m:
                    return m.group(1).strip()
    except OSError:
        pass
    return None


def compiler_of(build_dir):
    cache = os.path.join(build_dir, "CMakeCache.txt")
    out = {}
    for lang, var in (("c", "CMAKE_C_COMPILER"), ("cxx", "CMAKE_CXX_COMPILER")):
        path = read_first(cache, rf"{var}:\w+=(.*)")
        if not path:
            continue
        try:
            v = subprocess.run([path, "--version"], capture_output=True, text=True)
            out[lang] = (v.stdout.splitlines() or [path])[0].strip()
        except OSError:
            out[lang] = path
    out["build_type"] = read_first(cache, r"CMAKE_BUILD_TYPE:\w+=(.*)") or "?"
    return out


def machine_info(build_dir):
    cpu = read_first("/proc/cpuinfo", r"model name\s*:\s*(.*)") or platform.processor() or "?"
    mem_kib = read_first("/proc/meminfo", r"MemTotal:\s*(\d+)")
    distro = read_first("/etc/os-release", r'PRETTY_NAME="?([^"\n]*)"?') or platform.platform()
    comp = compiler_of(build_dir)
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_gib": round(int(mem_kib) / 1048576, 1) if mem_kib else None,
        "kernel": platform.release(),
        "distro": distro,
        "arch": platform.machine(),
        "compiler": comp.get("cxx") or comp.get("c") or "?",
        "c_compiler": comp.get("c", "?"),
        "build_type": comp.get("build_type", "?"),
        "python": platform.python_version(),
    }


# ----------------------------------------------------------------------------------------------
# Summaries and Markdown.

def fmt_duration(secs):
    return f"{secs:.0f} s" if secs < 120 else f"{secs / 60:.1f} minutes"


def fmt_mib(kib):
    return f"{kib / 1024:.1f}"


def scale_of(values):
    top = max(values) if values else 0
    if top >= 1e6:
        return 1e6, "M "
    if top >= 1e4:
        return 1e3, "k "
    return 1.0, ""


def fmt_fig(x, div):
    v = x / div
    return f"{v:.2f}" if v < 100 else f"{v:.1f}" if v < 1000 else f"{v:.0f}"


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
                s.update(figure_median=statistics.median(fig), figure_min=min(fig),
                         figure_max=max(fig), rss_median_kib=statistics.median(rss),
                         rss_min_kib=min(rss), rss_max_kib=max(rss),
                         seconds_median=statistics.median(secs) if secs else None)
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


def reference_allocator(results, summary):
    """roost, or the first allocator that has figures when roost has none."""
    names = [a["name"] for a in results["allocators"] if not a.get("missing")]
    for n in [ROOST] + names:
        if any("figure_median" in summary.get((c["id"], n), {}) for c in results["cases"]):
            return n
    return None


def render(results, summary, docs=None):
    """The Markdown report. docs: None (stdout) or a dict with plot links for the docs page."""
    out = []
    allocs = results["allocators"]
    names = [a["name"] for a in allocs]
    missing = {a["name"]: a["missing"] for a in allocs if a.get("missing")}
    alive = [n for n in names if n not in missing]
    cases = results["cases"]
    reps = results["config"]["reps"]
    reps_text = f"{reps} interleaved repetitions" if reps > 1 else "1 repetition"
    host = results["machine"]
    notbuilt = results["not_built"]
    ref = reference_allocator(results, summary)
    broken = {(b["workload"], b["allocator"]) for b in results.get("broken", [])}
    h = "###"

    if docs is not None:
        c = results["commit"]
        out += ["# roost benchmarks", "",
                f"Generated by `{results['config']['command']}` "
                f"on {results['date']} at roost commit `{c['commit']}`"
                + (f" (\"{c['subject']}\")" if c.get("subject") else "")
                + (", with uncommitted changes under src/ include/" if c.get("dirty") else "")
                + f"; {len(results['runs'])} runs in {fmt_duration(results['elapsed_s'])}. "
                "Do not edit by hand: rerun the command (`make bench-full`) to regenerate this "
                "page and the plots in `bench/` beside it. How the runner measures, and what "
                "each workload does: [`bench/README.md`](../bench/README.md).", "",
                "## Machine", "",
                "| | |", "|---|---|",
                f"| CPU | {host['cpu']} ({host['cpus']} CPUs visible, {host['arch']}) |",
                f"| memory | {host['memory_gib']} GiB |",
                f"| kernel | Linux {host['kernel']} |",
                f"| distribution | {host['distro']} |",
                f"| compiler | {host['compiler']} ({host['build_type']} build of roost; "
                "the workload programs `-O2 -fno-builtin`) |",
                f"| load average (1 min) | {results['loadavg_start'][0]:.2f} at the start, "
                f"{results['loadavg_end'][0]:.2f} at the end |", "",
                "## Allocators", "",
                "| allocator | version | source | how it is run |", "|---|---|---|---|"]
        for a in allocs:
            if a.get("missing"):
                out.append(f"| {a['name']} | **missing** | {a['missing']} | |")
            else:
                out.append(f"| {a['name']} | {a['version'] or '?'} | {a['source'] or ''} | "
                           f"{a['describe']} |")
        out += ["", "## Summary", ""]

    # The summary first in the docs; at the end on stdout (where the per-case
    # tables scroll by first).
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
        for c in cases:
            if c["wl"] in notbuilt:
                if c["wl"] not in shown_notbuilt:
                    shown_notbuilt.add(c["wl"])
                    summary_lines.append(f"| {c['wl']} | " + " | ".join(
                        "not built" for _ in others) + " |")
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
        if docs is not None and docs.get("relative"):
            summary_lines += ["", f"![time relative to the best, per workload]"
                              f"({docs['relative']})", "",
                              "Each bar: an allocator's median run time relative to the fastest "
                              "allocator's for that workload (1 = the fastest; lower is better)."]
    elif ref is None:
        summary_lines.append("No allocator produced figures.")

    if docs is not None:
        out += summary_lines
        out += ["", "## Workloads", "",
                f"Medians of {reps_text} (min–max in brackets). The figure "
                "is the program's own throughput (higher is better); the time is its measured "
                "part; the peak RSS is the whole process's (`ru_maxrss`, lower is better). "
                "× best: median / the highest median; × lowest: median / the lowest median."]
    else:
        out += ["## Benchmark suite: throughput and peak RSS", "",
                f"Medians of {reps_text} (min–max in brackets). The figure "
                "is the program's own throughput (higher is better), the time its measured part "
                "in seconds, the peak RSS the whole process's (`ru_maxrss`, lower is better). "
                "× best: median / the highest median; × lowest: median / the lowest median."]

    by_wl = {}
    for c in cases:
        by_wl.setdefault(c["wl"], []).append(c)
    wls = {w["key"]: w for w in results["workloads"]}
    for key, wcases in by_wl.items():
        w = wls[key]
        out += ["", f"### {w['label']} (`{key}`)", ""]
        if key in notbuilt:
            out.append(f"**not built**: {notbuilt[key]}")
            continue
        if w.get("stresses"):
            out.append(f"What it stresses: {w['stresses']}.")
        if len(wcases) > 1:
            if docs is not None and docs.get("threads", {}).get(key):
                out += ["", f"![{key}: throughput against threads]({docs['threads'][key]})"]
            out += sweep_table(w, wcases, names, missing, summary, broken)
        for c in wcases:
            out += case_table(w, c, names, missing, summary, broken)

    if docs is None:
        out += [""] + summary_lines

    # Notes: allocators, machine, failures.
    out.append("")
    if docs is None:
        for a in allocs:
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
    for key, why in notbuilt.items():
        out.append(f"- workload {key}: **not built**: {why}")
    diffs = [r["maxrss_kib"] - r["vmhwm_kib"] for r in results["runs"]
             if r["ok"] and r["vmhwm_kib"] is not None and r["vmhwm_kib"] >= 0]
    how = ("a subreaper-launched child, so it is the benchmark's own peak"
           if results["subreaper"] else
           "a direct child: WARNING, the figures include this runner's RSS at fork")
    if diffs:
        out.append(f"- peak RSS: `ru_maxrss` from `os.wait4` of {how}; it matches the program's "
                   f"own VmHWM within {min(diffs)}..{max(diffs)} KiB over all runs")
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
    out = ["", f"#### {c['label']}", "", f"`bench_{w['program']} {' '.join(c['args'])}`", ""]
    head = (f"| allocator | {pre}{unit} median (min–max) | × best | time s | peak RSS MiB "
            "median (min–max) | × lowest |")
    rule = "|---|---:|---:|---:|---:|---:|"
    if live:
        head += " peak live MiB | RSS ÷ live |"
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
        row = (f"| {bold}{n}{bold} | {fig} | {s['figure_vs_best']:.2f} | {secs} | {rss} | "
               f"{s['rss_vs_lowest']:.2f} |")
        if live:
            lv = s.get("live_median_kib")
            row += (f" {fmt_mib(lv)} | {s['rss_median_kib'] / lv:.2f} |" if lv else " ? | ? |")
        out.append(row)
    return out


# ----------------------------------------------------------------------------------------------
# Plots (matplotlib; in this interpreter, or in another python3 that has it).

def plot_all(results, outdir, prefix):
    """Writes the plots; returns {"threads": {key: file}, "relative": file} (file names)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = summarize(results)
    made = {"threads": {}, "relative": None}
    names = [a["name"] for a in results["allocators"] if not a.get("missing")]
    by_wl = {}
    for c in results["cases"]:
        if c["wl"] not in results["not_built"]:
            by_wl.setdefault(c["wl"], []).append(c)
    wls = {w["key"]: w for w in results["workloads"]}
    markers = "os^vD<>pP*Xh"
    os.makedirs(outdir, exist_ok=True)
    for key, wcases in by_wl.items():
        if len(wcases) < 2:
            continue
        w = wls[key]
        fig, ax = plt.subplots(figsize=(7, 4.2))
        vals = [summary[(c["id"], n)]["figure_median"] for c in wcases for n in names
                if "figure_median" in summary.get((c["id"], n), {})]
        div, pre = scale_of(vals)
        for i, n in enumerate(names):
            pts = [(c["threads"], summary[(c["id"], n)]) for c in wcases
                   if "figure_median" in summary.get((c["id"], n), {})]
            if not pts:
                continue
            xs = [p[0] for p in pts]
            ys = [p[1]["figure_median"] / div for p in pts]
            lo = [y - p[1]["figure_min"] / div for y, p in zip(ys, pts)]
            hi = [p[1]["figure_max"] / div - y for y, p in zip(ys, pts)]
            ax.errorbar(xs, ys, yerr=[lo, hi], marker=markers[i % len(markers)],
                        linewidth=2.2 if n == ROOST else 1.2, capsize=2, label=n,
                        zorder=3 if n == ROOST else 2)
        ax.set_xscale("log", base=2)
        ticks = sorted({c["threads"] for c in wcases})
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.set_xlabel("producer/consumer pairs (P = C)" if w["threads"] == "pc" else "threads")
        ax.set_ylabel(f"{pre}{UNITS.get(w['field'], w['field'])} (median, min–max)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{w['label']}\n({results['machine']['cpus']} CPUs)", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, ncol=2)
        fig.tight_layout()
        fname = f"{prefix}threads-{key}.png"
        fig.savefig(os.path.join(outdir, fname), dpi=110)
        plt.close(fig)
        made["threads"][key] = fname

    # Time relative to the best: one group per base case, one bar per allocator.
    base = [c for c in results["cases"] if c["base"] and c["wl"] not in results["not_built"]]
    base = [c for c in base if any("time_vs_best" in summary.get((c["id"], n), {})
                                   for n in names)]
    if base and names:
        width = 0.8 / len(names)
        wide = min(20, max(8, 0.12 * len(base) * len(names) + 2))
        fig, ax = plt.subplots(figsize=(wide, 4.5))
        top = 1.0
        for i, n in enumerate(names):
            xs, ys = [], []
            for j, c in enumerate(base):
                s = summary.get((c["id"], n), {})
                if "time_vs_best" in s:
                    xs.append(j + (i - (len(names) - 1) / 2) * width)
                    ys.append(s["time_vs_best"])
            top = max([top] + ys)
            ax.bar(xs, ys, width, label=n, edgecolor="black" if n == ROOST else None,
                   linewidth=1.2 if n == ROOST else 0)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(base)))
        ax.set_xticklabels([c["short"] for c in base], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("run time / fastest allocator's (lower is better)")
        if top > 8:
            ax.set_yscale("log", base=2)
        ax.set_title("Time relative to the fastest allocator, per workload (medians)",
                     fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8, ncol=min(len(names), 5))
        fig.tight_layout()
        fname = f"{prefix}relative-time.png"
        fig.savefig(os.path.join(outdir, fname), dpi=110)
        plt.close(fig)
        made["relative"] = fname
    return made


def has_matplotlib(py):
    try:
        return subprocess.run([py, "-c", "import matplotlib"], capture_output=True,
                              timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def find_plotter(install):
    """A python3 that can import matplotlib (installing it if allowed).

    Returns (path, None) or (None, why)."""
    try:
        import matplotlib  # noqa: F401
        return sys.executable, None
    except ImportError:
        pass
    candidates = []
    for py in (sys.executable, "/usr/bin/python3", shutil.which("python3")):
        if py and os.path.exists(py) and os.path.realpath(py) not in \
                [os.path.realpath(c) for c in candidates]:
            candidates.append(py)
    for py in candidates[1:]:
        if has_matplotlib(py):
            return py, None
    if not install:
        return None, "matplotlib is not importable and --no-install was given"
    tried = []
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if os.geteuid() == 0 and shutil.which("apt-get"):
        log("suite: installing python3-matplotlib with apt-get")
        cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "python3-matplotlib"]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True)
            r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            tried.append("`apt-get install python3-matplotlib` failed: "
                         + (r.stderr.strip().splitlines() or ["?"])[-1])
        for py in candidates + ["/usr/bin/python3"]:
            if os.path.exists(py) and has_matplotlib(py):
                return py, None
    log("suite: installing matplotlib with pip")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "matplotlib"],
                       capture_output=True, text=True)
    if r.returncode == 0 and has_matplotlib(sys.executable):
        return sys.executable, None
    tried.append("`pip install matplotlib` failed: "
                 + ((r.stderr or r.stdout).strip().splitlines() or ["?"])[-1])
    return None, "matplotlib could not be installed: " + "; ".join(tried)


def make_plots(results, json_path, targets, install):
    """targets: [(dir, prefix)]. Returns (list of made dicts, note or None)."""
    py, why = find_plotter(install)
    if py is None:
        return None, why
    made = []
    for outdir, prefix in targets:
        if _importable():
            made.append(plot_all(results, outdir, prefix))
            continue
        r = subprocess.run([py, os.path.abspath(__file__), "--plot-json", json_path,
                            "--plot-dir", outdir, "--plot-prefix", prefix],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return None, f"plotting with {py} failed: " + \
                ((r.stderr.strip().splitlines() or ["?"])[-1])
        made.append(json.loads(r.stdout))
    return made, None


def _importable():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


# ----------------------------------------------------------------------------------------------
# Main.

def parse_list(s):
    return [x.strip() for x in s.split(",") if x.strip()]


def select_workloads(ap, opts):
    if opts.workloads:
        chosen = []
        for pat in parse_list(opts.workloads):
            hits = [w for w in WORKLOADS if fnmatch.fnmatchcase(w.key, pat)]
            if not hits:
                ap.error(f"unknown workload {pat}; see --list")
            chosen += [w for w in hits if w not in chosen]
        return chosen
    want = "full" if opts.full else "default"
    return [w for w in WORKLOADS if want in w.sets]


def self_test(opts):
    """Two tiny workloads (and one that is not built) under glibc and roost, 1 rep."""
    global WORKLOADS
    WORKLOADS = [
        Workload("prodcons", "prodcons (tiny)", "prodcons",
                 ["-p", "1", "-c", "1", "-n", "20000", "-b", "64", "-q", "8"],
                 "objects_per_sec", "-n", threads="pc"),
        Workload("symmetric", "symmetric (tiny)", "symmetric", ["-t", "2", "-r", "50", "-b", "64"],
                 "ops_per_sec", "-r", threads="t", min_threads=2),
        Workload("absent", "a program that is never built", "selftest_absent", ["-n", "1"],
                 "ops_per_sec", "-n"),
    ]
    tmp = tempfile.mkdtemp(prefix="roost-suite-selftest-")
    docs = os.path.join(tmp, "docs", "BENCHMARKS.md")
    argv = ["--build-dir", opts.build_dir, "--workloads", "prodcons,symmetric,absent",
            "--allocators", "roost,glibc", "--reps", "1", "--threads", "1,2", "--no-install",
            "--no-plots", "--out-dir", tmp, "--docs", docs, "--timeout", "60"]
    log(f"suite self-test: {' '.join(argv)}")
    import io
    import contextlib
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(argv)
    text = buf.getvalue()
    problems = []
    if rc != 0:
        problems.append(f"the run exited {rc}")
    for needle in ("prodcons (tiny), 1P/1C", "prodcons (tiny), 2P/2C",
                   "symmetric (tiny), 2 threads",
                   "| **roost** |", "| glibc |", "Throughput relative to roost",
                   "geometric mean", "**not built**"):
        if needle not in text:
            problems.append(f"no `{needle}` in the tables")
    try:
        with open(os.path.join(tmp, "suite-runs.csv")) as f:
            rows = list(csv.DictReader(f))
        if len(rows) != 3 * 2:
            problems.append(f"suite-runs.csv has {len(rows)} runs, expected 6")
        bad = [r for r in rows if r["ok"] != "True" or not r["figure"]]
        if bad:
            problems.append(f"{len(bad)} failed run(s) in suite-runs.csv: "
                            + "; ".join(f"{r['case']} {r['allocator']}: {r['reason']}"
                                        for r in bad))
        with open(os.path.join(tmp, "suite-summary.csv")) as f:
            srows = list(csv.DictReader(f))
        if len(srows) != 3 * 2:
            problems.append(f"suite-summary.csv has {len(srows)} rows, expected 6")
        with open(os.path.join(tmp, "suite.json")) as f:
            js = json.load(f)
        if "absent" not in js["not_built"]:
            problems.append("suite.json does not report the absent workload as not built")
        with open(docs) as f:
            page = f.read()
        for needle in ("# roost benchmarks", "## Machine", "## Allocators", "## Summary"):
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
    print("suite self-test: ok (3 cases x 2 allocators, tables, CSV, JSON and docs page)")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build", "release"),
                    help="where libroost.so and bench/bench_* are (default build/release)")
    ap.add_argument("--full", action="store_true",
                    help="every workload, thread sweeps (1,2,4,8,16), 5 reps")
    ap.add_argument("--workloads", default="",
                    help="comma-separated workload keys (shell patterns allowed); see --list")
    ap.add_argument("--allocators", default="",
                    help="comma-separated allocators (default: roost, glibc and every peer; "
                         "variants such as roost-nobatchit only by name; NAME@VAR=VALUE adds "
                         "an environment variable)")
    ap.add_argument("--reps", type=int, default=None,
                    help="repetitions per case and allocator (default 3, --full 5)")
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
                    help="where bench/peers.py builds the crate peers (default build/peers)")
    ap.add_argument("--docs", default=None, metavar="FILE",
                    help="also write the report as a Markdown page (plots in FILE's folder/bench/)")
    ap.add_argument("--list", action="store_true", help="list workloads and allocators, then exit")
    ap.add_argument("--self-test", action="store_true",
                    help="tiny run under glibc and roost checking tables, CSV, JSON and docs")
    ap.add_argument("--plot-json", help=argparse.SUPPRESS)
    ap.add_argument("--plot-dir", help=argparse.SUPPRESS)
    ap.add_argument("--plot-prefix", default="", help=argparse.SUPPRESS)
    opts = ap.parse_args(argv)

    if opts.plot_json:  # plotting in a python3 that has matplotlib (see make_plots)
        with open(opts.plot_json) as f:
            results = json.load(f)
        print(json.dumps(plot_all(results, opts.plot_dir, opts.plot_prefix)))
        return 0
    if opts.self_test:
        return self_test(opts)

    reps = opts.reps if opts.reps is not None else (5 if opts.full else 3)
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
    workloads = select_workloads(ap, opts)

    if opts.list:
        print("Workloads (sets: default = `make bench`, full = `--full`):")
        for w in WORKLOADS:
            built = "built" if os.access(os.path.join(bindir, w.binary_name), os.X_OK) else \
                "NOT BUILT"
            sw = {"t": "sweeps -t", "pc": "sweeps -p/-c"}.get(w.threads, "") \
                if w.sweep else ("-t (no sweep in --full)" if w.threads else "")
            print(f"  {w.key:15} {'+'.join(w.sets):12} {built:9} {sw:24} "
                  f"{w.binary_name} {' '.join(w.args)}")
            print(f"  {'':15} {w.label}; figure {w.field}")
        peer_names = PEER_NAMES + [n for n in peer_module_names() if n not in PEER_NAMES]
        print("Allocators: roost, glibc, " + ", ".join(peer_names)
              + " (peers from bench/peers.py); opt-in variants: "
              + "; ".join(f"{k} ({v[2]})" for k, v in VARIANTS.items()))
        return 0

    named = set(parse_list(opts.workloads))
    cases = []
    for w in workloads:
        cases += make_cases(w, threads, opts.scale, named=w.key in named)
    not_built = {}
    for w in workloads:
        path = os.path.join(bindir, w.binary_name)
        if not os.access(path, os.X_OK):
            src = os.path.join(HERE, w.program + ".c")
            not_built[w.key] = (f"{rel(path)} is missing"
                                + ("" if os.path.exists(src) else
                                   f" (no bench/{w.program}.c yet)"))
    for key, why in not_built.items():
        log(f"suite: workload {key} not built: {why}")

    chosen = parse_list(opts.allocators) if opts.allocators else None
    if chosen:
        known = {ROOST, GLIBC} | set(VARIANTS) | set(PEER_NAMES) | set(peer_module_names())
        bad = [a for a in chosen if a.partition("@")[0] not in known]
        if bad:
            ap.error(f"unknown allocator(s) {', '.join(bad)}; known: {', '.join(sorted(known))}")
    allocs = resolve_allocators(chosen, build_dir, not opts.no_install, opts.peers_dir)
    byname = {a.name: a for a in allocs}

    # The preload must take effect: a tiny run of each built workload under each
    # allocator. A preload that does not take effect makes the allocator missing;
    # any other failure there is that pair's error (its timed runs are skipped).
    broken = {}  # (workload key, allocator) -> reason
    checked = [w for w in workloads if w.key not in not_built]
    for a in allocs:
        if a.missing:
            continue
        for w in checked:
            r = run_once(os.path.join(bindir, w.binary_name), tiny_args(w), a,
                         min(opts.timeout, 60))
            if r.get("preload_failed"):
                a.missing = f"preload check ({w.binary_name}) failed: {r['reason']}"
                break
            if not r["ok"]:
                broken[(w.key, a.name)] = f"check run `{w.binary_name} " \
                    f"{' '.join(tiny_args(w))}` failed: {r['reason']}"
                log(f"suite: {a.name} fails {w.key}'s check run: {r['reason']}")
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
    runs = []
    loadavg_start = os.getloadavg()
    t_start = time.time()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    done = 0
    for rep in range(reps):
        rot = rep % len(alive)
        rep_order = alive[rot:] + alive[:rot]
        for c in run_cases:
            for a in rep_order:
                if (c.wl.key, a.name) in broken:
                    continue
                binary = os.path.join(bindir, c.wl.binary_name)
                r = run_once(binary, c.args, a, opts.timeout)
                rp = r["report"]
                live = to_float(rp.get(c.wl.live)) if c.wl.live else None
                row = {"case": c.id, "workload": c.wl.key, "threads": c.threads or "",
                       "label": c.label, "allocator": a.name, "rep": rep + 1, "ok": r["ok"],
                       "reason": r["reason"] or "",
                       "figure": to_float(rp.get(c.wl.field)) if r["ok"] else None,
                       "figure_field": c.wl.field,
                       "seconds": to_float(rp.get("seconds")) if r["ok"] else None,
                       "maxrss_kib": r["maxrss_kib"],
                       "vmhwm_kib": int(to_float(rp.get("vmhwm_kib")) or -1),
                       "live_kib": live, "process_wall_s": round(r["wall_s"], 4),
                       "cpu_s": round(r["cpu_s"], 4),
                       "preload": rel(a.lib) if a.lib else "",
                       "env": " ".join(f"{k}={v}" for k, v in sorted(a.env.items())),
                       "malloc_from": rp.get("malloc_from", ""),
                       "command": " ".join([rel(binary)] + c.args)}
                if r["ok"] and row["figure"] is None:
                    row["ok"] = False
                    row["reason"] = f"no {c.wl.field}= in the report line"
                runs.append(row)
                done += 1
                el = time.time() - t_start
                eta = el / done * (total - done)
                if row["ok"]:
                    div, pre = scale_of([row["figure"]])
                    what = (f"{fmt_fig(row['figure'], div)} {pre}"
                            f"{UNITS.get(c.wl.field, c.wl.field)}, {row['seconds']:.3f} s, "
                            f"{fmt_mib(row['maxrss_kib'])} MiB")
                else:
                    what = "FAILED: " + row["reason"]
                log(f"  [{done}/{total}] rep {rep + 1} {c.id} {a.name}: {what} "
                    f"({el:.0f}s, ~{eta:.0f}s left)")
    elapsed = time.time() - t_start
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
        "subreaper": bool(SUBREAPER),
        "config": {"reps": reps, "scale": opts.scale, "threads": list(threads),
                   "full": opts.full, "build_dir": rel(build_dir), "timeout_s": opts.timeout,
                   "command": os.environ.get("ROOST_SUITE_COMMAND") or cmdline},
        "allocators": [{"name": a.name, "library": a.lib, "env": a.env, "version": a.version,
                        "source": a.source, "missing": a.missing, "describe": a.describe()}
                       for a in allocs],
        "workloads": [{"key": w.key, "label": w.label, "program": w.program, "args": w.args,
                       "field": w.field, "work": w.work, "threads": w.threads,
                       "sweep": w.sweep, "live": w.live, "stresses": w.stresses}
                      for w in workloads],
        "cases": [{"id": c.id, "wl": c.wl.key, "label": c.label, "short": c.short,
                   "args": c.args,
                   "threads": c.threads, "base": c.base, "program": c.wl.program}
                  for c in cases],
        "not_built": not_built,
        "broken": [{"workload": k, "allocator": n, "reason": why}
                   for (k, n), why in broken.items()],
        "errors": errors,
        "runs": runs,
    }
    summary = summarize(results)
    results["summary"] = list(summary.values())

    os.makedirs(opts.out_dir, exist_ok=True)
    json_path = os.path.join(opts.out_dir, "suite.json")
    with open(json_path, "w") as f:
        json.dump(results, f, indent=1)
    cols = ["case", "workload", "threads", "label", "allocator", "rep", "ok", "reason", "figure",
            "figure_field", "seconds", "maxrss_kib", "vmhwm_kib", "live_kib", "process_wall_s",
            "cpu_s", "preload", "env", "malloc_from", "command"]
    runs_csv = os.path.join(opts.out_dir, "suite-runs.csv")
    with open(runs_csv, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=cols)
        wr.writeheader()
        for r in runs:
            wr.writerow({k: r[k] for k in cols})
    scols = ["case", "allocator", "runs", "failed", "figure_median", "figure_min", "figure_max",
             "figure_vs_best", "time_vs_best", "seconds_median", "rss_median_kib",
             "rss_min_kib", "rss_max_kib", "rss_vs_lowest", "live_median_kib"]
    sum_csv = os.path.join(opts.out_dir, "suite-summary.csv")
    with open(sum_csv, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=scols, extrasaction="ignore")
        wr.writeheader()
        for s in summary.values():
            wr.writerow(s)

    # Plots.
    docs_links = None
    made = None
    if opts.no_plots:
        results["plots_note"] = None
    else:
        targets = [(opts.out_dir, "suite-")]
        docs_plot_dir = None
        if opts.docs:
            docs_plot_dir = os.path.join(os.path.dirname(os.path.abspath(opts.docs)), "bench")
            os.makedirs(docs_plot_dir, exist_ok=True)
            for old in os.listdir(docs_plot_dir):  # plots of an earlier selection
                if re.fullmatch(r"(threads-.*|relative-time)\.png", old):
                    os.remove(os.path.join(docs_plot_dir, old))
            targets.append((docs_plot_dir, ""))
        made, why = make_plots(results, json_path, targets, not opts.no_install)
        if made is None:
            results["plots_note"] = f"none drawn: {why}"
            log(f"suite: no plots: {why}")
        else:
            files = [os.path.join(opts.out_dir, f) for f in
                     list(made[0]["threads"].values()) + [made[0]["relative"]] if f]
            results["plots_note"] = f"{len(files)} written to {rel(opts.out_dir)}/"
            if opts.docs:
                d = made[1]
                docs_links = {"threads": {k: "bench/" + v for k, v in d["threads"].items()},
                              "relative": "bench/" + d["relative"] if d["relative"] else None}

    print(render(results, summary), end="", flush=True)
    if opts.docs:
        page = render(results, summary, docs=docs_links or {})
        os.makedirs(os.path.dirname(os.path.abspath(opts.docs)), exist_ok=True)
        with open(opts.docs, "w") as f:
            f.write(page)
        log(f"suite: wrote {rel(opts.docs)}")
    log(f"suite: wrote {rel(runs_csv)}, {rel(sum_csv)} and {rel(json_path)} ({elapsed:.0f}s)")
    if errors and not roost_failed:
        log("suite: only peers failed; exit status 0")
    return 1 if roost_failed else 0


if __name__ == "__main__":
    sys.exit(main())
