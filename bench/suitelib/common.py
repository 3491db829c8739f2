"""Paths, logging and number formatting: what every module of the suite (and
bench/fastpath.py) uses."""

import os
import sys

BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # bench/
REPO = os.path.dirname(BENCH_DIR)
SCRIPT = os.path.join(BENCH_DIR, "suite.py")  # the command (plots run it again)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def rel(path):
    p = os.path.abspath(path)
    return os.path.relpath(p, REPO) if p.startswith(REPO + os.sep) else p


def parse_list(s):
    return [x.strip() for x in s.split(",") if x.strip()]


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
