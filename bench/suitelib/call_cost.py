"""bench/call_cost.py: instructions per malloc and per free, thread by thread, under callgrind:
the producer's malloc and the consumer's remote free in a producer-consumer run, and a local
free in a single-thread one, for roost and the peers.

Each workload runs once per allocator, preloaded, under `valgrind --tool=callgrind
--separate-threads=yes`.  A call's cost is what callgrind charges to it inclusively (the
allocator's own instructions and whatever it calls, the kernel's work excepted), read from
the calls the benchmark program makes into the allocator's library; a thread's figure is
the cost of its calls to functions of one kind (allocation: malloc, calloc, ...; free:
free, cfree, sized and aligned frees, delete) over their number.  So the program's own
instructions are left out, and every allocator is counted the same way whatever its
functions are called inside.

    python3 bench/call_cost.py                                  # roost and the peers
    python3 bench/call_cost.py --allocators roost --sizes 64    # objects of one size

The threads of a producer-consumer run: the one with the most allocation calls is the
producer, the one with the most free calls the consumer.  With 1 producer and 1 consumer
(the default) every object the consumer frees is remote: another thread allocated it.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

from . import allocators as allocs
from . import callgrind
from .measure import provider_ok, run_env

DEFAULT_ALLOCATORS = "roost,snmalloc,mimalloc-v2,mimalloc-v3,tcmalloc"

# The entry points a program calls, by the names allocators give them (some
# export aliases: tcmalloc's tc_*).  The names callgrind reports are the
# symbols at the called addresses.
ALLOC_NAMES = {"malloc", "calloc", "realloc", "aligned_alloc", "posix_memalign", "memalign",
               "valloc", "tc_malloc", "tc_calloc", "tc_realloc", "tc_memalign", "mi_malloc",
               "_Znwm", "_Znam"}
FREE_NAMES = {"free", "cfree", "free_sized", "free_aligned_sized", "tc_free", "tc_cfree",
              "tc_free_sized", "mi_free", "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm"}


def call_costs(path, program):
    """{"alloc": (calls, Ir), "free": (calls, Ir)} of one callgrind output file (one thread):
    calls from `program` (the benchmark's executable) to the allocation and free entry
    points, inclusive."""
    program = os.path.realpath(program)
    out = {"alloc": [0, 0], "free": [0, 0]}
    for ob, _, _, cfn, calls, ir in callgrind.read(path)["calls"]:
        if not ob or os.path.realpath(ob) != program:
            continue
        kind = "alloc" if cfn in ALLOC_NAMES else "free" if cfn in FREE_NAMES else None
        if kind is not None:
            out[kind][0] += calls
            out[kind][1] += ir
    return {k: tuple(v) for k, v in out.items()}


def run_threads(build, lib, env_extra, argv, outdir, tag):
    """Per-thread call costs of one run of bench program argv[0] (list of dicts)."""
    out = os.path.join(outdir, tag + ".%p")
    env = run_env(lib, env_extra)
    cmd = ["valgrind", "--tool=callgrind", "--fair-sched=yes", "--separate-threads=yes",
           "--dump-instr=no",
           f"--callgrind-out-file={out}", "--log-file=" + os.path.join(outdir, tag + ".log"),
           os.path.join(build, "bench", argv[0])] + argv[1:]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or [""])[-1]
        raise RuntimeError(f"exit {r.returncode} under valgrind: {last}")
    provider = None
    for line in reversed(r.stdout.splitlines()):
        m = re.search(r"\bmalloc_from=(\S+)", line)
        if m:
            provider = m.group(1)
            break
    if not provider_ok(lib, provider):
        raise RuntimeError(f"preload not in effect under valgrind (malloc from {provider})")
    program = os.path.join(build, "bench", argv[0])
    return [call_costs(p, program) for p in sorted(glob.glob(os.path.join(outdir, tag + ".*-*")))]


def per_call(pair):
    calls, ir = pair
    return ir / calls if calls else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    allocs.add_allocator_args(ap, DEFAULT_ALLOCATORS)
    ap.add_argument("--sizes", default="16-2048",
                    help="object sizes: MIN-MAX (uniform, the suite's xmalloc) or one size")
    ap.add_argument("-n", type=int, default=200000, help="objects per producer (default 200000)")
    args = ap.parse_args()
    lo, _, hi = args.sizes.partition("-")
    hi = hi or lo
    resolved = allocs.allocators_from_args(ap, args)
    xmalloc = ["bench_xmalloc", "-p", "1", "-c", "1", "-n", str(args.n), "-s", lo, "-S", hi]
    if lo == hi:
        local = ["bench_fastpath", "--window", "64", "fixed", lo, str(args.n)]
    else:
        local = ["bench_fastpath", "--window", "64", "random", lo, str(min(int(hi), 1024)),
                 str(args.n)]
    print(f"Instructions per call (callgrind, inclusive): `{' '.join(xmalloc)}` and "
          f"`{' '.join(local)}`\n")
    print("| allocator | producer's malloc | consumer's remote free | local malloc | "
          "local free |")
    print("|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as outdir:
        for a in resolved:
            if a.missing:
                print(f"| {a.name} | missing: {a.missing} | | | |", flush=True)
                continue
            if a.lib is None:
                print(f"| {a.name} | not measured (no library to preload) | | | |")
                continue
            tag = re.sub(r"[^A-Za-z0-9_.-]", "_", a.name)
            try:
                threads = run_threads(args.build, a.lib, a.env, xmalloc, outdir, tag + ".pc")
                single = run_threads(args.build, a.lib, a.env, local, outdir, tag + ".local")
            except RuntimeError as e:
                print(f"| {a.name} | not measured: {e} | | | |", flush=True)
                continue
            producer = max(threads, key=lambda t: t["alloc"][0])
            consumer = max(threads, key=lambda t: t["free"][0])
            main_thread = max(single, key=lambda t: t["free"][0])
            print(f"| {a.name} | {per_call(producer['alloc']):.1f} | "
                  f"{per_call(consumer['free']):.1f} | {per_call(main_thread['alloc']):.1f} | "
                  f"{per_call(main_thread['free']):.1f} |", flush=True)
    return 0
