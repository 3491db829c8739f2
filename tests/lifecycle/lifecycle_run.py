#!/usr/bin/env python3
"""Runs a lifecycle test program and checks how it ended: exit status 0
within the time limit, in every one of --runs runs, and its stderr and
stdout matching the given regular expressions (searched with re.DOTALL |
re.MULTILINE, so ".*" spans lines and "A.*B" asserts an order).  The
program runs with this environment less every ROOST_* variable and
LD_PRELOAD, plus --env settings.

  lifecycle_run.py [--runs N] [--timeout S] [--env VAR=VALUE]...
                   [--stderr REGEX]... [--stdout REGEX]... -- PROGRAM ARGS...
"""
import argparse
import os
import re
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--stderr", action="append", default=[])
    ap.add_argument("--stdout", action="append", default=[])
    ap.add_argument("command", nargs="+")
    args = ap.parse_args()

    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ROOST_") and k != "LD_PRELOAD"}
    for setting in args.env:
        name, _, value = setting.partition("=")
        env[name] = value

    start = time.monotonic()
    for run in range(args.runs):
        try:
            r = subprocess.run(args.command, env=env, capture_output=True,
                               timeout=args.timeout)
        except subprocess.TimeoutExpired as e:
            err = (e.stderr or b"").decode(errors="replace")
            sys.exit(f"run {run + 1}: no exit within {args.timeout} s; stderr:\n{err}")
        out = r.stdout.decode(errors="replace")
        err = r.stderr.decode(errors="replace")
        problems = []
        if r.returncode != 0:
            how = (f"killed by signal {-r.returncode}" if r.returncode < 0
                   else f"exit status {r.returncode}")
            problems.append(how)
        for stream, text, patterns in (("stderr", err, args.stderr),
                                       ("stdout", out, args.stdout)):
            for p in patterns:
                if not re.search(p, text, re.DOTALL | re.MULTILINE):
                    problems.append(f"{stream} does not match {p!r}")
        if problems:
            sys.exit(f"run {run + 1} of {args.runs}: " + "; ".join(problems) +
                     f"\ncommand: {' '.join(args.command)}\nstdout:\n{out}\nstderr:\n{err}")
    print(f"{args.runs} run(s) of {' '.join(args.command)} passed "
          f"in {time.monotonic() - start:.2f} s")


if __name__ == "__main__":
    main()
