"""The smallest address-space limit (`ulimit -v`, RLIMIT_AS) under which a command still runs,
for each allocator (command: bench/ulimit_floor.py).

    python3 bench/ulimit_floor.py                       # the default command, every allocator
    python3 bench/ulimit_floor.py --allocators roost,glibc -- sort --version

For each allocator the command runs with RLIMIT_AS set in the child (soft and hard) and the
allocator preloaded as the suite preloads it (allocators.py resolves roost, glibc and the peers,
peers.py installs or builds the peers; the environment is measure.run_env's). A run succeeds
when the command exits 0 within the timeout and, for a preloaded allocator, the dynamic loader
initialised that library in the command's process: with LD_DEBUG=files the loader writes
"calling init: <library>" into an LD_DEBUG_OUTPUT file per process (the loader that cannot map
a preloaded library under the limit says so and runs the command without it, which must not
count). The floor is found by bisection between 0 and --high MiB, to within --step MiB, taking
success to be monotonic in the limit: the result is the smallest limit seen to succeed, the
largest seen to fail being at most --step below it.

Prints a Markdown table on stdout (allocator, version, smallest limit in MiB, difference from
glibc in MiB; a command that fails even at --high is said so, with the end of its stderr) and
progress on stderr. Exits 1 if an allocator is missing or fails at --high, 2 on bad arguments.
"""

import argparse
import glob
import os
import resource
import shlex
import signal
import subprocess
import sys
import tempfile
import time

from . import allocators
from .common import REPO, last_lines, log, parse_list, rel
from .measure import run_env

MIB = 1024 * 1024
DEFAULT_COMMAND = [sys.executable, "-c", "import json; json.dumps(list(range(10**6)))"]
DEFAULT_ALLOCATORS = ["roost", "glibc", "jemalloc", "mimalloc", "mimalloc-v2", "mimalloc-v3",
                      "snmalloc"]


def run_limited(command, alloc, limit_mib, timeout):
    """Runs `command` under `alloc` with RLIMIT_AS = limit_mib MiB: (ok, why not)."""
    limit = limit_mib * MIB

    def set_limit():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    with tempfile.TemporaryDirectory(prefix="ulimit-floor.") as tmp:
        env = run_env(alloc.lib, alloc.env)
        if alloc.lib:
            env["LD_DEBUG"] = "files"
            env["LD_DEBUG_OUTPUT"] = os.path.join(tmp, "ld")
        try:
            p = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 preexec_fn=set_limit)
        except OSError as e:
            return False, f"cannot start: {e}"
        try:
            _, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            return False, f"timed out after {timeout:g} s"
        err = err.decode(errors="replace")
        if p.returncode < 0:
            return False, f"killed by {signal.Signals(-p.returncode).name}: {last_lines(err)}"
        if p.returncode != 0:
            return False, f"exit status {p.returncode}: {last_lines(err)}"
        if alloc.lib:
            try:
                with open(os.path.join(tmp, f"ld.{p.pid}"), errors="replace") as f:
                    trace = f.read()
            except OSError:
                trace = ""
            names = {os.path.abspath(alloc.lib), os.path.realpath(alloc.lib)}
            if not any(f"calling init: {n}\n" in trace for n in names):
                return False, (f"exited 0 but {rel(alloc.shown)} was not initialised in it "
                               f"(preload not in effect)")
    return True, ""


def floor_of(command, alloc, high, step, timeout):
    """(smallest succeeding limit in MiB or None, runs, why the run at `high` failed)."""
    runs = 1
    ok, why = run_limited(command, alloc, high, timeout)
    if not ok:
        return None, runs, why
    lo, hi = 0, high // step  # in steps: lo fails (no address space at all), hi succeeds
    while hi - lo > 1:
        mid = (lo + hi) // 2
        ok, _ = run_limited(command, alloc, mid * step, timeout)
        runs += 1
        if ok:
            hi = mid
        else:
            lo = mid
    return hi * step, runs, ""


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="The smallest `ulimit -v` under which a command runs, per allocator.",
        usage="%(prog)s [options] [-- command ...]")
    ap.add_argument("--allocators", default=",".join(DEFAULT_ALLOCATORS),
                    help="comma-separated allocators, as bench/suite.py names them "
                         "(default: %(default)s)")
    ap.add_argument("--high", type=int, default=32768,
                    help="upper bound of the bisection, MiB (default: %(default)s)")
    ap.add_argument("--step", type=int, default=8,
                    help="resolution of the bisection, MiB (default: %(default)s)")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds one run may take (default: %(default)s)")
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build", "release"),
                    help="where libroost.so is (default: build/release)")
    ap.add_argument("--peers-dir", default=os.path.join(REPO, "build", "peers"),
                    help="where peers.py builds snmalloc and mimalloc v2/v3 (default: build/peers)")
    ap.add_argument("--no-install", action="store_true",
                    help="install and build nothing: what is missing is shown as missing")
    ap.add_argument("--roost-within", type=int, metavar="MIB",
                    help="exit 1 unless every roost build's floor is at most glibc's plus MIB "
                         "(glibc must be among the allocators)")
    ap.add_argument("command", nargs="*", help="the command (default: python3 -c "
                    "'import json; json.dumps(list(range(10**6)))')")
    opts = ap.parse_args(argv)
    if opts.step < 1 or opts.high < opts.step or opts.high % opts.step:
        ap.error("--high must be a positive multiple of --step")
    command = opts.command or DEFAULT_COMMAND
    names = parse_list(opts.allocators)
    if not names:
        ap.error("no allocators")
    if opts.roost_within is not None and allocators.GLIBC not in names:
        ap.error("--roost-within needs glibc among the allocators")
    try:
        allocs = allocators.resolve_allocators(names, opts.build_dir, not opts.no_install,
                                               opts.peers_dir)
    except (ValueError, KeyError) as e:
        ap.error(str(e))

    t0 = time.monotonic()
    results = {}
    for a in allocs:
        if a.missing:
            log(f"ulimit_floor: {a.name}: missing: {a.missing}")
            results[a.name] = (None, 0, f"missing: {a.missing}")
            continue
        t = time.monotonic()
        results[a.name] = floor_of(command, a, opts.high, opts.step, opts.timeout)
        floor, runs, why = results[a.name]
        log(f"ulimit_floor: {a.name}: " +
            (f"{floor} MiB" if floor is not None else f"fails at {opts.high} MiB: {why}") +
            f" ({runs} runs, {time.monotonic() - t:.1f} s)")

    glibc = results.get(allocators.GLIBC, (None,))[0]
    print(f"Smallest `ulimit -v` (RLIMIT_AS) under which `{shlex.join(command)}` exits 0, "
          f"to within {opts.step} MiB (bisection up to {opts.high} MiB):\n")
    print("| allocator | version | smallest limit (MiB) | vs glibc (MiB) |")
    print("|---|---|---|---|")
    for a in allocs:
        floor, _, why = results[a.name]
        if floor is None:
            shown = (why if a.missing else
                     f"does not run even at {opts.high} MiB ({why})").replace("|", "\\|")
            diff = "n/a"
        else:
            shown = str(floor)
            diff = "n/a" if glibc is None else f"{floor - glibc:+d}"
        print(f"| {a.name} | {a.version or '?'} | {shown} | {diff} |")
    log(f"ulimit_floor: {time.monotonic() - t0:.0f} s")
    if any(r[0] is None for r in results.values()):
        return 1
    if opts.roost_within is not None:
        over = [a.name for a in allocs if allocators.in_roost_family(a.name)
                and (glibc is None or results[a.name][0] > glibc + opts.roost_within)]
        if over:
            log(f"ulimit_floor: above glibc's floor plus {opts.roost_within} MiB: "
                + ", ".join(over))
            return 1
    return 0
