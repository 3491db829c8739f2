"""Running and measuring: one benchmark process under one allocator (its report line, exit
status, verification, preload and peak RSS), the check runs before the timed ones, and the
timed runs themselves, interleaved."""

import os
import subprocess
import tempfile
import time

from .common import fmt_fig, fmt_mib, log, rel, scale_of
from .workloads import UNITS, tiny_args

# Environment variables removed from every run, so each allocator runs in its
# default configuration (a variant sets what it needs on top).
SCRUB_PREFIXES = ("ROOST_", "MIMALLOC_", "TCMALLOC_", "SNMALLOC_", "TBB_")
SCRUB_NAMES = ("LD_PRELOAD", "MALLOC_CONF", "_RJEM_MALLOC_CONF", "GLIBC_TUNABLES",
               "MALLOC_ARENA_MAX", "MALLOC_TOP_PAD_", "MALLOC_TRIM_THRESHOLD_",
               "MALLOC_MMAP_THRESHOLD_")


def run_env(lib=None, extra=None):
    """The environment of one benchmark process: this one without the variables above, plus
    `extra`, plus LD_PRELOAD=lib when lib is given."""
    env = {k: v for k, v in os.environ.items()
           if k not in SCRUB_NAMES and not k.startswith(SCRUB_PREFIXES)}
    env.update(extra or {})
    if lib:
        env["LD_PRELOAD"] = os.path.abspath(lib)
    return env


def parse_report(stdout):
    """The program's key=value line as a dict (the last line that has bench=)."""
    for line in reversed(stdout.splitlines()):
        if "bench=" in line:
            return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
    return {}


def provider_ok(lib, provider):
    """Whether `provider`, the object a program reported malloc from, is the one expected: the
    preloaded `lib`, or glibc's libc.so when lib is None."""
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
# only, not on the shell; so is LD_DEBUG for a real program's check run ($dbg:
# the LD_DEBUG_OUTPUT prefix, programs.py).
LAUNCH = """out=$1; err=$2; pre=$3; dbg=$4; shift 4
exec 3<&0
{ read go <&3; if [ -n "$pre" ]; then export LD_PRELOAD="$pre"; fi
  if [ -n "$dbg" ]; then export LD_DEBUG=files,bindings LD_DEBUG_OUTPUT="$dbg"; fi
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


def run_process(argv, lib, env, timeout, cwd=None, debug=None):
    """Runs one process (argv) with LD_PRELOAD=lib (None: no preload) in environment env, through
    the subreaper launch above, in folder cwd; debug: LD_DEBUG_OUTPUT's prefix for
    LD_DEBUG=files,bindings. Returns a dict: exit, timed_out, stdout, stderr, maxrss_kib
    (wait4's ru_maxrss: the process's own peak, or its largest waited-for child's), wall_s,
    cpu_s (its own and its waited-for children's user + system time), sys_s (their system
    time)."""
    with tempfile.TemporaryDirectory(prefix="roost-suite-") as tmp:
        outp, errp = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        t0 = time.monotonic()
        if become_subreaper():
            gate_r, gate_w = os.pipe()
            try:
                sh = subprocess.run(["/bin/sh", "-c", LAUNCH, "sh", outp, errp,
                                     os.path.abspath(lib) if lib else "", debug or ""] + argv,
                                    env=env, stdin=gate_r, stdout=subprocess.PIPE, text=True,
                                    cwd=cwd)
            finally:
                os.close(gate_r)
                os.close(gate_w)  # EOF on the pipe: the subshell goes on and execs
            pid = int(sh.stdout.strip())
        else:  # fallback: RSS figures include this process's RSS at fork
            env = dict(env, LD_PRELOAD=os.path.abspath(lib)) if lib else env
            if debug:
                env = dict(env, LD_DEBUG="files,bindings", LD_DEBUG_OUTPUT=debug)
            with open(outp, "wb") as o, open(errp, "wb") as e:
                pid = subprocess.Popen(argv, env=env, stdout=o, stderr=e, cwd=cwd,
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
        wall = time.monotonic() - t0
        with open(outp, errors="replace") as f:
            stdout = f.read()
        with open(errp, errors="replace") as f:
            stderr = f.read()
    return {"exit": os.waitstatus_to_exitcode(status), "timed_out": timed_out, "stdout": stdout,
            "stderr": stderr, "maxrss_kib": usage.ru_maxrss, "wall_s": wall,
            "cpu_s": usage.ru_utime + usage.ru_stime, "sys_s": usage.ru_stime}


def exit_reason(p, timeout):
    """Why a run_process() result failed by its exit (timed out, non-zero status), or None."""
    tail = (p["stderr"].strip().splitlines() or [""])[-1][:200]
    if p["timed_out"]:
        return f"timed out after {timeout:g} s"
    if p["exit"] != 0:
        sig = f" (signal {-p['exit']})" if p["exit"] < 0 else ""
        return f"exit {p['exit']}{sig}" + (f": {tail}" if tail else "")
    return None


def run_once(binary, args, alloc, timeout):
    """Runs one benchmark process. Returns a dict: ok, reason, report, maxrss_kib, wall_s."""
    lib = alloc.lib
    p = run_process([binary] + args, lib, run_env(None, alloc.env), timeout)
    rep = parse_report(p["stdout"])
    res = {"ok": False, "reason": None, "report": rep, "maxrss_kib": p["maxrss_kib"],
           "wall_s": p["wall_s"], "cpu_s": p["cpu_s"], "sys_s": p["sys_s"], "exit": p["exit"]}
    tail = (p["stderr"].strip().splitlines() or [""])[-1][:200]
    res["reason"] = exit_reason(p, timeout)
    if res["reason"] is None and rep.get("verify") != "ok":
        res["reason"] = "no verify=ok in the output" + (f": {tail}" if tail else "")
    elif res["reason"] is None and not provider_ok(lib, rep.get("malloc_from")):
        res["reason"] = f"preload not in effect: malloc from {rep.get('malloc_from')}"
        res["preload_failed"] = True
    res["ok"] = res["reason"] is None
    return res


def run_case(wl, args, alloc, bindir, timeout, check=False):
    """One run of a workload: a bench_* program of ours, or a real program (programs.py, whose
    workloads carry their own runner); check: the check run."""
    if getattr(wl, "kind", "") == "program":
        return wl.run(args, alloc, timeout, check)
    return run_once(os.path.join(bindir, wl.binary_name), args, alloc, timeout)


def to_float(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


# ----------------------------------------------------------------------------------------------
# The check runs and the timed runs.

def check_runs(workloads, allocs, bindir, timeout):
    """The preload must take effect: a tiny run of each (built) workload under each allocator.

    A preload that does not take effect in one of our programs makes the allocator missing
    (a.missing is set); in a real program (programs.py), whose tree LD_DEBUG checks, it is
    that pair's error, as is any other failure (its timed runs are skipped). Returns
    {(workload key, allocator): reason} for those."""
    broken = {}
    for a in allocs:
        if a.missing:
            continue
        for w in workloads:
            r = run_case(w, tiny_args(w), a, bindir, min(timeout, 60), check=True)
            external = getattr(w, "kind", "") == "program"
            if r.get("preload_failed") and not external:
                a.missing = f"preload check ({w.binary_name}) failed: {r['reason']}"
                break
            if not r["ok"]:
                what = r.get("command") or f"{w.binary_name} {' '.join(tiny_args(w))}"
                broken[(w.key, a.name)] = f"check run `{what}` failed: {r['reason']}"
                log(f"suite: {a.name} fails {w.key}'s check run: {r['reason']}")
    return broken


def run_row(c, a, rep, binary, r):
    """One run's row of suite-runs.csv (and suite.json)."""
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
           "cpu_s": round(r["cpu_s"], 4), "sys_s": round(r.get("sys_s", 0.0), 4),
           "preload": rel(a.shown) if a.lib else "",
           "env": " ".join(f"{k}={v}" for k, v in sorted(a.env.items())),
           "malloc_from": rp.get("malloc_from", ""),
           "command": r.get("command") or " ".join([rel(binary)] + c.args)}
    if r["ok"] and row["figure"] is None:
        row["ok"] = False
        row["reason"] = f"no {c.wl.field}= in the report line"
    return row


def run_all(cases, alive, broken, reps, bindir, timeout, total):
    """The timed runs, interleaved: repetition 1 runs every case under every allocator, then
    repetition 2, ..., the allocator order rotated by one each time. Pairs in `broken` are
    skipped. Returns (rows, seconds elapsed); logs progress (total: the number of runs)."""
    runs = []
    t_start = time.time()
    done = 0
    for rep in range(reps):
        rot = rep % len(alive)
        rep_order = alive[rot:] + alive[:rot]
        for c in cases:
            for a in rep_order:
                if (c.wl.key, a.name) in broken:
                    continue
                binary = os.path.join(bindir, c.wl.binary_name)
                row = run_row(c, a, rep, binary,
                              run_case(c.wl, c.args, a, bindir, timeout))
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
    return runs, time.time() - t_start
