"""bench/queue_spread.py: how far a producer runs ahead of its consumers under each allocator,
run after run: the spread of xmalloc's peak queue (blocks of objects produced and not yet
consumed) and of its peak RSS over many runs.

xmalloc has no back-pressure of its own: whatever slows its producers down (a slower
allocation than free, or an allocator that makes a producer wait for its objects) bounds
its queue, and with it the memory the run holds.  One run says little (a run's queue
depends on how the threads happened to be scheduled); this runs each configuration
`--runs` times, allocators interleaved, and prints the median, the 90th percentile and the
largest of each figure, and the largest over the median (a bounded allocator stays near 1,
an unbounded one has runs far above its median).

    python3 bench/queue_spread.py                                   # 1P/1C and 4P/4C, 20 runs
    python3 bench/queue_spread.py --pairs 1 --runs 10 --allocators roost,roost@ROOST_BACKPRESSURE=0
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

from . import allocators as allocs
from .measure import provider_ok, run_env

DEFAULT_ALLOCATORS = "roost,mimalloc,tcmalloc"


def one_run(build, alloc, pairs, n):
    argv = [os.path.join(build, "bench", "bench_xmalloc"), "-p", str(pairs), "-c", str(pairs),
            "-n", str(n)]
    r = subprocess.run(argv, env=run_env(alloc.lib, alloc.env), capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{alloc.name}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    kv = dict(re.findall(r"(\w+)=(\S+)", r.stdout))
    if not provider_ok(alloc.lib, kv.get("malloc_from")):
        raise RuntimeError(f"{alloc.name}: preload not in effect (malloc from "
                           f"{kv.get('malloc_from')})")
    return int(kv["peak_queued_blocks"]), int(kv["vmhwm_kib"]) / 1024, float(kv["seconds"])


def spread(values):
    v = sorted(values)
    med = statistics.median(v)
    p90 = v[min(len(v) - 1, int(round(0.9 * (len(v) - 1))))]
    return med, p90, v[-1], (v[-1] / med if med else float("inf"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    allocs.add_allocator_args(ap, DEFAULT_ALLOCATORS)
    ap.add_argument("--pairs", default="1,4", help="producer = consumer counts (default 1,4)")
    ap.add_argument("--runs", type=int, default=20, help="runs per configuration (default 20)")
    ap.add_argument("-n", type=int, default=1000000,
                    help="objects in all, split between the producers (default 1000000)")
    args = ap.parse_args()
    resolved = allocs.allocators_from_args(ap, args)
    missing = [a for a in resolved if a.missing or a.lib is None and a.name != "glibc"]
    for a in missing:
        print(f"{a.name}: missing ({a.missing})", file=sys.stderr)
    resolved = [a for a in resolved if a not in missing]
    print("| pairs | allocator | peak queued blocks: median / p90 / max (max/median) | "
          "peak RSS MiB: median / p90 / max (max/median) | seconds, median |")
    print("|---:|---|---|---|---:|")
    for pairs in (int(p) for p in args.pairs.split(",")):
        runs = {a.name: [] for a in resolved}
        for i in range(args.runs):
            for a in resolved:
                runs[a.name].append(one_run(args.build, a, pairs, args.n // pairs))
            print(f"  {pairs}P/{pairs}C: run {i + 1} of {args.runs}", file=sys.stderr)
        for a in resolved:
            q = spread([r[0] for r in runs[a.name]])
            m = spread([r[1] for r in runs[a.name]])
            secs = statistics.median(r[2] for r in runs[a.name])
            print(f"| {pairs} | {a.name} | {q[0]:.0f} / {q[1]:.0f} / {q[2]:.0f} ({q[3]:.1f}) | "
                  f"{m[0]:.1f} / {m[1]:.1f} / {m[2]:.1f} ({m[3]:.1f}) | {secs:.3f} |",
                  flush=True)
    return 0
