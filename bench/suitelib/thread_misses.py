"""bench/thread_misses.py: instructions and cache misses of the application's threads, apart from
roost's service thread, under callgrind's cache simulation.

Each workload runs once per configuration (environment) with libroost.so
preloaded, under `valgrind --tool=callgrind --cache-sim=yes
--separate-threads=yes`; the per-thread outputs are summed, the service
thread's (the one whose functions include the service loop) apart.

    python3 bench/thread_misses.py                       # inline, service, offload
    python3 bench/thread_misses.py --configs ROOST_SERVICE=0,ROOST_OFFLOAD=1

Callgrind runs the threads one at a time, so which thread touches a line
first decides whose miss it is: compare like with like, and read LL misses
with that in mind.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

from .common import REPO
from .measure import parse_report, provider_ok, run_env

# Short runs of the suite's programs (callgrind is ~50x slower).
WORKLOADS = {
    "cachepollute": ["bench_cachepollute", "-n", "20000"],
    "msgpass": ["bench_msgpass", "-p", "1", "-c", "1", "-n", "200000"],
    "xmalloc": ["bench_xmalloc", "-p", "2", "-c", "2", "-n", "50000"],
    "prodcons": ["bench_prodcons", "-p", "2", "-c", "2", "-n", "200000"],
    "larson": ["bench_larson", "-t", "4", "-g", "20", "-n", "15000"],
    "threadtest": ["bench_threadtest", "-t", "4", "-i", "50", "-n", "10000"],
}
CONFIGS = "ROOST_SERVICE=0,ROOST_SERVICE=1,ROOST_OFFLOAD=1"
SERVICE_LOOP = re.compile(r"^c?fn=\(\d+\) roost::service::.*::run\(", re.M)


def thread_totals(path):
    """(events, is_service) of one callgrind output file."""
    text = open(path, errors="replace").read()
    names = re.search(r"^events: (.*)$", text, re.M).group(1).split()
    totals = re.search(r"^(?:totals|summary): (.*)$", text, re.M)
    values = [int(v) for v in totals.group(1).split()] if totals else [0] * len(names)
    ev = dict(zip(names, values + [0] * (len(names) - len(values))))
    return ev, bool(SERVICE_LOOP.search(text))


def run(build, workload, config, outdir):
    argv = WORKLOADS[workload]
    lib = os.path.join(build, "libroost.so")
    env = run_env(lib, dict(kv.split("=", 1) for kv in config.split("@")))
    tag = f"{workload}.{config.replace('=', '_').replace('@', '+')}"
    out = os.path.join(outdir, tag + ".%p")
    cmd = ["valgrind", "--tool=callgrind", "--cache-sim=yes", "--separate-threads=yes",
           f"--callgrind-out-file={out}", "--log-file=" + os.path.join(outdir, tag + ".log"),
           os.path.join(build, "bench", argv[0])] + argv[1:]
    r = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    provider = parse_report(r.stdout).get("malloc_from")
    if not provider_ok(lib, provider):
        sys.exit(f"{workload}: preload not in effect under valgrind (malloc from {provider})")
    app = {"Ir": 0, "D1": 0, "LL": 0}
    service_ir = 0
    for path in glob.glob(os.path.join(outdir, tag + ".*-*")):
        ev, is_service = thread_totals(path)
        if is_service:
            service_ir += ev.get("Ir", 0)
            continue
        app["Ir"] += ev.get("Ir", 0)
        app["D1"] += ev.get("D1mr", 0) + ev.get("D1mw", 0)
        app["LL"] += ev.get("ILmr", 0) + ev.get("DLmr", 0) + ev.get("DLmw", 0)
    return app, service_ir


def fmt(n):
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= div:
            return f"{n / div:.3f} {unit}" if unit != "k" else f"{n / div:.1f} k"
    return str(n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build", "release"))
    ap.add_argument("--configs", default=CONFIGS,
                    help="comma-separated environments, VAR=VALUE[@VAR=VALUE] each "
                         f"(default {CONFIGS})")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    args = ap.parse_args()
    configs = args.configs.split(",")
    print("| workload | configuration | app Ir | app D1 misses | app LL misses | "
          "service thread Ir |")
    print("|---|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as outdir:
        for w in args.workloads.split(","):
            if w not in WORKLOADS:
                sys.exit(f"unknown workload {w}; known: {', '.join(WORKLOADS)}")
            for c in configs:
                app, svc = run(args.build, w, c, outdir)
                print(f"| {w} | {c} | {fmt(app['Ir'])} | {fmt(app['D1'])} | {fmt(app['LL'])} | "
                      f"{svc:,} |", flush=True)
