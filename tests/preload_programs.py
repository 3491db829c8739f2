#!/usr/bin/env python3
"""Real programs under LD_PRELOAD=libroost.so.

Runs each workload once on the system allocator and once with
LD_PRELOAD=libroost.so ROOST_STATS=1, and checks that
  - both exit 0,
  - stdout (and the files the program writes) are identical,
  - the roost run's stderr has a line "roost: allocations N" (roost prints
    its counters at exit; every process of the run does) with N above the
    workload's threshold, proving roost served it.

Workloads: (a) python3 building a dict of 200k strings, sorting, JSON
round trips (PYTHONMALLOC=malloc so every object goes through malloc);
(b) sort(1) of a generated 20 MB file, merging through temporary files; (c) g++ -O1 -c of data/compile_me.cc
(object files compared byte for byte); (d) git init/add/commit/log/gc in a
fresh repository with fixed dates, so hashes are reproducible.

With --ulimit-v MIB the roost runs happen under that address-space limit
(RLIMIT_AS, as `ulimit -v` sets it) and must still match the system
allocator's unlimited runs: roost degrades under a limit, it does not refuse.

Needs python3, coreutils sort, g++, git.  Usage:
  preload_programs.py --lib path/to/libroost.so --data tests/data --work DIR [--ulimit-v MIB]
"""

import argparse
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import time

STATS_RE = re.compile(r"^roost: allocations +([0-9]+)  ", re.M)


class Failure(Exception):
    pass


def clean_env(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROOST_") and k != "LD_PRELOAD"}
    env["LC_ALL"] = "C"
    env.update(extra)
    return env


def run(cmd, env, cwd, timeout=120, stdin=None, limit=None):
    def set_limit():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    start = time.monotonic()
    p = subprocess.run(cmd, env=env, cwd=cwd, stdin=stdin, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout,
                       preexec_fn=set_limit if limit else None)
    return p, time.monotonic() - start


class Runner:
    def __init__(self, lib, work, limit=None):
        self.lib = lib
        self.work = work
        self.limit = limit  # RLIMIT_AS of the roost runs, in bytes

    def env(self, roost, extra=None):
        e = {"LD_PRELOAD": self.lib, "ROOST_STATS": "1"} if roost else {}
        e.update(extra or {})
        return clean_env(e)

    def run_steps(self, name, steps, roost, extra_env=None, cwd=None):
        """Runs a list of commands in order; returns (stdout, stderr, seconds)."""
        out, err, secs = b"", "", 0.0
        for cmd in steps:
            p, t = run(cmd, self.env(roost, extra_env), cwd or self.work,
                       limit=self.limit if roost else None)
            secs += t
            out += p.stdout
            err += p.stderr.decode(errors="replace")
            if p.returncode != 0:
                raise Failure("%s (%s): %r exited %d\nstderr:\n%s" % (
                    name, "roost" if roost else "system", cmd, p.returncode, tail(err)))
        return out, err, secs


def tail(text, lines=30):
    return "\n".join(text.splitlines()[-lines:])


def check_stats(name, err, threshold):
    counts = [int(m) for m in STATS_RE.findall(err)]
    if not counts:
        raise Failure("%s: no \"roost: allocations N\" line on stderr of the roost run "
                      "(LD_PRELOAD not effective, or the statistics were lost at exit: a program "
                      "that closes fd 2 before exiting, as coreutils do, loses them unless roost "
                      "keeps its own descriptor)\nstderr:\n%s"
                      % (name, tail(err)))
    if max(counts) <= threshold:
        raise Failure("%s: roost served only %d allocations in its busiest process (want > %d)"
                      % (name, max(counts), threshold))
    return max(counts)


def compare(name, what, a, b):
    if a != b:
        raise Failure("%s: %s differs between the system allocator and roost (%d vs %d bytes)"
                      % (name, what, len(a), len(b)))


# ---------------------------------------------------------------------------
# Workloads.  Each returns a one-line summary or raises Failure.

def python_workload(r, data):
    name = "python3"
    script = os.path.join(data, "py_workload.py")
    extra = {"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0"}
    base, _, t0 = r.run_steps(name, [[sys.executable, script]], False, extra)
    mine, err, t1 = r.run_steps(name, [[sys.executable, script]], True, extra)
    compare(name, "stdout", base, mine)
    n = check_stats(name, err, 1000)
    return "%s: identical output, %d allocations by roost (%.1fs system, %.1fs roost)" % (name, n, t0, t1)


def sort_workload(r, data):
    name = "sort"
    path = os.path.join(r.work, "lines.txt")
    rng = random.Random(20)
    lines, size = [], 0
    while size < 20 * 1024 * 1024:
        line = "%x %x\n" % (rng.getrandbits(rng.randint(8, 200)), rng.getrandbits(16))
        lines.append(line)
        size += len(line)
    with open(path, "w") as f:
        f.writelines(lines)
    tmp = os.path.join(r.work, "sort-tmp")
    os.makedirs(tmp)
    # A 256 KiB buffer makes sort merge through ~100 temporary files: many
    # more allocations (buffers, FILE streams, merge state) than sorting in
    # one big buffer, which takes a dozen.
    cmd = ["sort", "-S", "256K", "-T", tmp, path]
    base, _, t0 = r.run_steps(name, [cmd], False)
    mine, err, t1 = r.run_steps(name, [cmd], True)
    compare(name, "stdout", base, mine)
    if base != "".join(sorted(lines)).encode():
        raise Failure("sort: output is not the sorted input")
    n = check_stats(name, err, 1000)
    return "%s: identical output, %d allocations by roost (%.1fs system, %.1fs roost)" % (name, n, t0, t1)


def gxx_workload(r, data):
    name = "g++"
    src = os.path.join(data, "compile_me.cc")
    objs = [os.path.join(r.work, "system.o"), os.path.join(r.work, "roost.o")]
    base, _, t0 = r.run_steps(name, [["g++", "-std=c++17", "-O1", "-c", src, "-o", objs[0]]], False)
    mine, err, t1 = r.run_steps(name, [["g++", "-std=c++17", "-O1", "-c", src, "-o", objs[1]]], True)
    compare(name, "stdout", base, mine)
    with open(objs[0], "rb") as f:
        a = f.read()
    with open(objs[1], "rb") as f:
        b = f.read()
    if a != b:
        nm = [subprocess.run(["nm", "-C", o], stdout=subprocess.PIPE).stdout for o in objs]
        raise Failure("g++: object files differ (%d vs %d bytes; nm output %s)"
                      % (len(a), len(b), "identical" if nm[0] == nm[1] else "differs too"))
    n = check_stats(name, err, 1000)
    return "%s: identical object file, %d allocations by roost (%.1fs system, %.1fs roost)" % (
        name, n, t0, t1)


def git_workload(r, data):
    name = "git"
    if shutil.which("git") is None:
        raise Failure("git not found")

    def sequence(roost):
        repo = os.path.join(r.work, "repo-" + ("roost" if roost else "system"))
        os.makedirs(repo)
        home = os.path.join(r.work, "home")
        os.makedirs(home, exist_ok=True)
        extra = {"HOME": home, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
                 "GIT_AUTHOR_NAME": "Roost Test", "GIT_AUTHOR_EMAIL": "roost@example.invalid",
                 "GIT_COMMITTER_NAME": "Roost Test", "GIT_COMMITTER_EMAIL": "roost@example.invalid",
                 "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
                 "TZ": "UTC"}
        git = ["git", "-c", "init.defaultBranch=main", "-c", "pack.threads=1", "-c", "gc.auto=0"]
        out, err, secs = r.run_steps(name, [git + ["init", "-q"]], roost, extra, repo)
        rng = random.Random(5)
        for commit in range(4):
            for i in range(120):
                if commit > 0 and rng.random() < 0.7:
                    continue
                d = os.path.join(repo, "dir%d" % (i % 8))
                os.makedirs(d, exist_ok=True)
                with open(os.path.join(d, "file%03d.txt" % i), "w") as f:
                    for _ in range(rng.randint(5, 200)):
                        f.write("%d %x line of file %d in commit %d\n" % (
                            rng.randint(0, 10**6), rng.getrandbits(64), i, commit))
            o, e, s = r.run_steps(name, [git + ["add", "-A"],
                                         git + ["commit", "-q", "-m", "commit %d" % commit]],
                                  roost, extra, repo)
            out, err, secs = out + o, err + e, secs + s
        o, e, s = r.run_steps(name, [
            git + ["log", "--stat", "--format=%H %an %ad %s"],
            git + ["log", "-p", "-2", "--format=%H"],
            git + ["gc", "-q"],
            git + ["count-objects", "-v"],
            git + ["fsck", "--no-progress"],
            git + ["rev-parse", "HEAD", "HEAD^{tree}"],
            git + ["ls-tree", "-r", "HEAD"],
        ], roost, extra, repo)
        return out + o, err + e, secs + s

    base, _, t0 = sequence(False)
    mine, err, t1 = sequence(True)
    compare(name, "stdout", base, mine)
    n = check_stats(name, err, 1000)
    return "%s: identical output, %d allocations by roost in the busiest process (%.1fs system, %.1fs roost)" % (
        name, n, t0, t1)


WORKLOADS = {"python": python_workload, "sort": sort_workload, "gxx": gxx_workload, "git": git_workload}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True, help="libroost.so")
    ap.add_argument("--data", required=True, help="tests/data")
    ap.add_argument("--work", required=True, help="scratch directory (recreated)")
    ap.add_argument("--only", action="append", choices=sorted(WORKLOADS), help="run only these")
    ap.add_argument("--ulimit-v", type=int, metavar="MIB",
                    help="run roost's side under this address-space limit (MiB)")
    args = ap.parse_args()

    lib = os.path.abspath(args.lib)
    if not os.path.isfile(lib):
        print("FAIL: %s does not exist" % lib)
        return 1
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    r = Runner(lib, os.path.abspath(args.work), args.ulimit_v << 20 if args.ulimit_v else None)
    if args.ulimit_v:
        print("roost runs under ulimit -v %d MiB" % args.ulimit_v, flush=True)
    failures = 0
    start = time.monotonic()
    for key in args.only or list(WORKLOADS):
        try:
            print("ok   " + WORKLOADS[key](r, os.path.abspath(args.data)), flush=True)
        except Failure as e:
            failures += 1
            print("FAIL " + str(e), flush=True)
        except subprocess.TimeoutExpired as e:
            failures += 1
            print("FAIL %s: timed out: %r" % (key, e.cmd), flush=True)
    print("%d workload(s) failed, %.1fs" % (failures, time.monotonic() - start))
    if failures == 0:
        shutil.rmtree(args.work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
