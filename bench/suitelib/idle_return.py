"""How much memory each allocator gives back while the program sleeps (command:
bench/idle_return.py).

    python3 bench/idle_return.py                     # every scene, the default allocators
    python3 bench/idle_return.py --scenes handoff --mib 1024 --reps 5

Runs bench_idle_return (bench/idle_return.c) under each allocator, interleaved: for each
repetition, each scene, each allocator in turn. The program allocates --mib MiB of small objects
in one thread (or, scene `exited`, in --threads threads that exit), frees them from another, and
sleeps while it samples its resident memory; its figures are the share of the peak still
resident (above the baseline before the first allocation) at 100, 250, 500, 1000 and 2000 ms,
and the first time a sample was under 10 %. Prints a Markdown table of medians per scene and
allocator on stdout, progress on stderr. Exits 1 if an allocator is missing or a run fails.
"""

import argparse
import os
import statistics
import subprocess
import sys

from . import allocators
from .common import REPO, log, parse_list
from .measure import parse_report, provider_ok, run_env

DEFAULT_ALLOCATORS = ["roost", "roost@ROOST_SERVICE=0", "glibc", "jemalloc",
                      "jemalloc@MALLOC_CONF=background_thread:true", "tcmalloc", "mimalloc",
                      "mimalloc-v2", "mimalloc-v3", "snmalloc"]
SCENES = ["handoff", "exited", "owner"]
CHECKPOINTS = ["t100", "t250", "t500", "t1000", "t2000"]


def run_one(binary, alloc, scene, opts):
    args = [binary, "--scene", scene, "--mib", str(opts.mib), "--threads", str(opts.threads),
            "--sleep-ms", "2000"]
    r = subprocess.run(args, env=run_env(alloc.lib, alloc.env), stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=opts.timeout)
    rep = parse_report(r.stdout)
    if r.returncode != 0 or rep.get("verify") != "ok":
        return None, f"exit status {r.returncode}: {r.stderr.strip()[-300:]}"
    if not provider_ok(alloc.lib, rep.get("malloc_from")):
        return None, f"malloc came from {rep.get('malloc_from')}, not the allocator under test"
    return rep, ""


def main(argv=None):
    ap = argparse.ArgumentParser(description="Memory given back while the program sleeps.")
    ap.add_argument("--allocators", default=",".join(DEFAULT_ALLOCATORS),
                    help="comma-separated, as bench/suite.py names them (default: %(default)s)")
    ap.add_argument("--scenes", default=",".join(SCENES), help="default: %(default)s")
    ap.add_argument("--mib", type=int, default=256, help="MiB allocated (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=64,
                    help="allocating threads in scene `exited` (default: %(default)s)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (default: %(default)s)")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build", "release"))
    ap.add_argument("--peers-dir", default=os.path.join(REPO, "build", "peers"))
    ap.add_argument("--no-install", action="store_true")
    opts = ap.parse_args(argv)
    binary = os.path.join(opts.build_dir, "bench", "bench_idle_return")
    if not os.path.exists(binary):
        ap.error(f"{binary} is not built (make release)")
    scenes = parse_list(opts.scenes)
    if any(s not in SCENES for s in scenes):
        ap.error(f"scenes are {', '.join(SCENES)}")
    allocs = allocators.resolve_allocators(parse_list(opts.allocators), opts.build_dir,
                                           not opts.no_install, opts.peers_dir)
    failed = False
    results = {}  # (scene, name) -> [report]
    for rep in range(opts.reps):
        for scene in scenes:
            for a in allocs:
                if a.missing:
                    continue
                r, why = run_one(binary, a, scene, opts)
                if r is None:
                    log(f"idle_return: {a.name} {scene}: {why}")
                    failed = True
                    continue
                results.setdefault((scene, a.name), []).append(r)
                log(f"idle_return: rep {rep + 1} {scene} {a.name}: "
                    + " ".join(f"{c}={r.get(c, '?')}" for c in CHECKPOINTS)
                    + f" below10_ms={r.get('below10_ms')}")
    for a in allocs:
        if a.missing:
            log(f"idle_return: {a.name}: missing: {a.missing}")
            failed = True

    print(f"Resident share of the peak (%, median of {opts.reps}) while the process sleeps "
          f"after {opts.mib} MiB of small objects were freed; `below 10 %`: the first sample "
          f"under 10 % (ms after the last free; median; - when none within 2 s).\n")
    for scene in scenes:
        print(f"Scene `{scene}`:\n")
        print("| allocator | " + " | ".join(c[1:] + " ms" for c in CHECKPOINTS) +
              " | below 10 % | peak MiB |")
        print("|---|" + "---:|" * (len(CHECKPOINTS) + 2))
        for a in allocs:
            rs = results.get((scene, a.name))
            if not rs:
                continue
            cells = []
            for c in CHECKPOINTS:
                cells.append(f"{statistics.median(float(r[c]) for r in rs):.1f}")
            below = [int(r["below10_ms"]) for r in rs]
            met = [b for b in below if b >= 0]
            below_cell = f"{statistics.median(met):.0f}" if len(met) * 2 > len(below) else "-"
            peak = statistics.median((int(r["peak_kib"]) - int(r["base_kib"])) / 1024 for r in rs)
            print(f"| {a.name} | " + " | ".join(cells) + f" | {below_cell} | {peak:.0f} |")
        print()
    return 1 if failed else 0
