#!/usr/bin/env python3
"""Where roost's memory is at a program's peak RSS.

Runs a program under libroost.so with bench/peak_census.c's shim preloaded
after it (built as <build dir>/bench/libpeak_census.so): the shim takes
roost's statistics each time the resident size grows past its highest by 1 %,
and writes the last of them at exit.  This prints, for each run, the peak
resident size and what roost held at that moment, in MiB:

  in use        bytes of live small objects (roost_class_stats bytes_in_use)
  free in slabs objects on the slabs' free lists
  fast lists/in flight  carved objects neither in use nor on a slab's free
                list: on the threads' fast lists, or freed by another thread
                and on their way home (BatchIt caches, outboxes, inboxes)
  uncarved      resident pages of slabs not carved into objects (a chunk's
                earlier use left them resident)
  dirty         released memory not purged yet (the purge delay)
  other         the rest of the resident size: large objects, metadata,
                the program's own

and the slabs by state (active, available, sleeping) and those held by
allocators of exited threads (parked), and the slabs adopted so far.  Figures
are read while the program runs: approximate.

    python3 bench/peak_census.py [--build-dir build/release] [--reps 3]
        [--env ROOST_ADOPT=0 ...] -- build/release/bench/bench_larson -t 16 -g 20 -n 150000
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

MIB = 1 << 20
COLUMNS = ["rss", "in use", "free in slabs", "fast lists/in flight", "uncarved", "dirty",
           "other", "slabs", "active", "available", "sleeping", "parked", "adopted"]


def census(line):
    rss_kib = int(re.search(r"rss_kib=(\d+)", line)[1])
    j = json.loads(line.split("json=", 1)[1])
    t = j["totals"]
    classes = j["classes"]
    in_use = sum(c["bytes_in_use"] for c in classes)
    free = sum(c["slab_objects_free"] * c["size"] for c in classes)
    carved = sum(c["slab_bytes_carved"] for c in classes)
    touched = sum(c["slab_bytes_touched"] for c in classes)
    rss = rss_kib * 1024
    return {
        "rss": rss / MIB, "in use": in_use / MIB, "free in slabs": free / MIB,
        "fast lists/in flight": max(carved - in_use - free, 0) / MIB,
        "uncarved": max(touched - carved, 0) / MIB, "dirty": t["bytes_dirty"] / MIB,
        "other": (rss - touched - t["bytes_dirty"]) / MIB, "slabs": t["slabs"],
        "active": sum(c["slabs_active"] for c in classes),
        "available": sum(c["slabs_available"] for c in classes),
        "sleeping": sum(c["slabs_sleeping"] for c in classes),
        "parked": sum(c["slabs_parked"] for c in classes), "adopted": t["slabs_adopted"],
    }


def row(name, values):
    cells = ["%.1f" % values[c] if isinstance(values[c], float) else "%d" % values[c]
             for c in COLUMNS]
    return f"| {name} | " + " | ".join(cells) + " |"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default="build/release")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--env", action="append", default=[], help="VAR=VALUE for the runs")
    ap.add_argument("--name", default="", help="the first column's label")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("no command given")
    lib = os.path.abspath(os.path.join(args.build_dir, "libroost.so"))
    shim = os.path.abspath(os.path.join(args.build_dir, "bench", "libpeak_census.so"))
    for f in (lib, shim):
        if not os.path.exists(f):
            sys.exit(f"peak_census: {f} is missing (build {args.build_dir} first)")
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            out = os.path.join(tmp, f"census.{rep}")
            env = dict(os.environ, LD_PRELOAD=f"{lib} {shim}", PEAK_CENSUS_FILE=out)
            env.update(kv.split("=", 1) for kv in args.env)
            subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
            with open(out) as f:
                runs.append(census(f.read()))
    name = args.name or " ".join(args.env) or "roost"
    print("| run | " + " | ".join(COLUMNS) + " |")
    print("|---|" + "---:|" * len(COLUMNS))
    for rep, r in enumerate(runs):
        print(row(f"{name}, run {rep + 1}", r))
    median = {c: statistics.median(r[c] for r in runs) for c in COLUMNS}
    print(row(f"{name}, median", median))


if __name__ == "__main__":
    main()
