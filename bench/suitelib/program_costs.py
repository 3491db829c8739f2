"""bench/program_costs.py: where a real program's instructions go, allocator by allocator,
under callgrind: the whole process tree's instructions, and the allocator's share of them.

Each real program of the suite (programs.py: CPython, g++, the SQLite shell, Perl, RocksDB's
db_bench, Redis) runs once per allocator on the input the suite makes for it, its work scaled
by --scale (callgrind runs them 30 to 60 times slower), preloaded as the suite preloads it,
under `valgrind --tool=callgrind --trace-children=yes`, and its output checked as the suite
checks it. Instruction counts do not depend on the machine's speed, so they settle what
wall times of a few seconds on a shared machine cannot; they leave out what the instructions
wait for (cache and TLB misses, page faults, the kernel's work), which the suite's times and
/usr/bin/time show.

The allocator's share: what callgrind charges inclusively to the calls into the allocator's
library from the rest of the program, in every process of the tree (for glibc, whose
libc.so holds everything else too: the calls of its entry points, malloc, free, calloc,
realloc, the aligned ones, malloc_usable_size, but those from its own entry points);
with the number of those calls and their cost per call. Every run has ROOST_HUGEPAGES=off:
under valgrind roost's service thread looks for blocks to collapse far more often than
natively (its clock runs while valgrind crawls), which would charge roost for work a native
run does not do.

    python3 bench/program_costs.py                                   # every program
    python3 bench/program_costs.py --workloads redis,perl-words \\
        --allocators roost,mimalloc-v34,glibc --scale 0.2
"""
import argparse
import glob
import os
import shutil
import subprocess
import tempfile

from . import allocators as allocs
from . import callgrind, programs
from .workloads import arg_value, parse_count, set_arg

DEFAULT_ALLOCATORS = "roost,glibc,jemalloc,tcmalloc,mimalloc-v2,mimalloc-v34"
# The C entry points, also under the prefixes some allocators export them with (mimalloc's
# mi_, tcmalloc's tc_, glibc's __libc_): callgrind names a function by one of the symbols at
# its address, whichever it picks.
C_ENTRIES = {"malloc", "free", "cfree", "calloc", "realloc", "reallocarray", "aligned_alloc",
             "posix_memalign", "memalign", "valloc", "pvalloc", "malloc_usable_size",
             "malloc_size", "usable_size", "free_sized", "free_aligned_sized", "free_size",
             "new", "new_n", "zalloc", "malloc_aligned", "free_aligned"}
PREFIXES = ("mi_", "tc_", "__libc_")
CXX_ENTRIES = ("operator new", "operator delete")


def is_entry(name):
    if name.startswith(CXX_ENTRIES):
        return True
    for p in PREFIXES:
        if name.startswith(p):
            name = name[len(p):]
            break
    return name in C_ENTRIES


def process_costs(path, lib):
    """One callgrind output file (one process): {"cmd", "total", "alloc", "calls"}: its
    instructions, and the inclusive cost and number of the calls into the allocator's library
    `lib` (a path): every call into it from another object (a preloaded allocator's library
    holds nothing else a program calls, and some, as tcmalloc, give their entry points no
    name callgrind sees); in glibc's libc.so, the calls of its entry points but those from
    its own entry points (libc's strdup and stdio call malloc too, as libstdc++'s operator
    new does)."""
    lib = os.path.realpath(lib)
    is_libc = os.path.basename(lib).startswith("libc.so")
    read = callgrind.read(path)
    out = {"cmd": read["cmd"], "total": read["total"], "alloc": 0, "calls": 0}
    for ob, fn, cob, cfn, calls, ir in read["calls"]:
        if cob is None or os.path.realpath(cob) != lib:
            continue
        within = ob is not None and os.path.realpath(ob) == lib
        if is_libc:
            counted = is_entry(cfn or "") and not (within and is_entry(fn or ""))
        else:
            counted = not within
        if counted:
            out["calls"] += calls
            out["alloc"] += ir
    return out


def scaled(wl, scale):
    """The workload's arguments with its work scaled (never below its check run's)."""
    work = parse_count(arg_value(wl.args, wl.work))
    return set_arg(wl.args, wl.work, max(wl.tiny, int(round(work * scale))))


def measure(wl, args, alloc, timeout):
    """One run of the real program `wl` under callgrind: {"ok", "reason", "processes"}."""
    spec = wl.prepare(args)
    lib = programs.preload_lib(wl, alloc)
    out_dir = tempfile.mkdtemp(prefix="roost-costs-")
    run_dir = tempfile.mkdtemp(prefix="run-", dir=spec["folder"])
    try:
        env = programs.program_env(alloc, run_dir)
        env["ROOST_HUGEPAGES"] = "off"
        if lib:
            env["LD_PRELOAD"] = os.path.abspath(lib)
        cmd = ["valgrind", "--tool=callgrind", "--trace-children=yes", "--dump-instr=no",
               f"--callgrind-out-file={out_dir}/cg.%p", f"--log-file={out_dir}/vg.%p"]
        try:
            r = subprocess.run(cmd + wl.argv(spec), env=env, cwd=run_dir, capture_output=True,
                               text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"ok": False, "reason": f"over {timeout} s under callgrind"}
        reason = None if r.returncode == 0 else f"exit {r.returncode} under callgrind"
        if reason is None:
            reason, _ = spec["check"](r.stdout, run_dir)
        if reason:
            return {"ok": False, "reason": reason}
        procs = [process_costs(p, lib or programs.linked_libc(wl.path) or "libc.so.6")
                 for p in sorted(glob.glob(os.path.join(out_dir, "cg.*")))]
        return {"ok": True, "reason": None, "processes": procs}
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
        shutil.rmtree(run_dir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    allocs.add_allocator_args(ap, DEFAULT_ALLOCATORS)
    ap.add_argument("--workloads", default=",".join(p.key for p in programs.PROGRAMS),
                    help="comma-separated real programs of the suite (default: all)")
    ap.add_argument("--scale", type=float, default=0.1,
                    help="their work against the suite's (default 0.1)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds one run may take")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        ap.error("valgrind is not installed (apt-get install valgrind)")
    table = {p.key: p for p in programs.PROGRAMS}
    chosen = [k for k in args.workloads.split(",") if k]
    unknown = [k for k in chosen if k not in table]
    if unknown:
        ap.error(f"not a real program of the suite: {', '.join(unknown)} "
                 f"(they are {', '.join(table)})")
    wls = [table[k] for k in chosen]
    missing = programs.ensure_available(wls, not args.no_install)
    resolved = allocs.allocators_from_args(ap, args)
    for wl in wls:
        wargs = scaled(wl, args.scale)
        print(f"\n### {wl.key}: `{wl.command(wargs)}`\n")
        if wl.key in missing:
            print(f"not available: {missing[wl.key]}")
            continue
        print("| allocator | the tree's instructions | against roost's | the allocator's "
              "| share | calls | per call |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        base = None
        for a in resolved:
            if a.missing:
                print(f"| {a.name} | missing: {a.missing} | | | | | |", flush=True)
                continue
            r = measure(wl, wargs, a, args.timeout)
            if not r["ok"]:
                print(f"| {a.name} | not measured: {r['reason']} | | | | | |", flush=True)
                continue
            total = sum(p["total"] for p in r["processes"])
            alloc = sum(p["alloc"] for p in r["processes"])
            calls = sum(p["calls"] for p in r["processes"])
            if a.name == "roost":
                base = total
            against = f"{total / base:.3f}" if base else ""
            print(f"| {a.name} | {total / 1e6:,.1f} M | {against} | {alloc / 1e6:,.1f} M | "
                  f"{100 * alloc / total:.1f} % | {calls:,} | "
                  f"{alloc / calls if calls else float('nan'):.1f} |", flush=True)
        wl.cleanup()
    return 0
