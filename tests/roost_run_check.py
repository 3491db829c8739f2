#!/usr/bin/env python3
"""roost-run's command line, end to end: the launcher of the build tree runs
tests/options_probe.cc (unlinked; roost preloaded) and this script reads
what comes out.

  tests/roost_run_check.py --roost-run BUILD/roost-run --probe BUILD/tests/roost_options_probe

Checks:
  - `--stats json` and `--stats text` (the form as a separate argument) set
    the report's form, as `--stats=json` does; `--stats=xml` is refused;
  - every report names its process: pid, program and time;
  - `--no-children` keeps only the report of the program roost-run starts
    (and of what it execs), not those of the processes it starts;
  - `--option NAME=VALUE` with an unknown NAME says "did you mean" when an
    option is within two edits, written as NAME was;
  - `--secure` and `--hardened` preload their level's library;
  - ROOST_VERBOSE's line of an unset path option says "(unset)".
Exits 1 with every failure listed.
"""

import argparse
import json
import os
import re
import subprocess
import sys

failures = []


def check(ok, what, detail=""):
    if not ok:
        failures.append(what + (": " + detail if detail else ""))


def run(args, env_extra=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ROOST_") and k != "LD_PRELOAD"}
    env.update(env_extra or {})
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)


HEADER = re.compile(r"^roost: report of pid ([0-9]+) \((.*)\) at "
                    r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} UTC$", re.M)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--roost-run", required=True)
    ap.add_argument("--probe", required=True)
    args = ap.parse_args()
    rr, probe = args.roost_run, args.probe
    probe_name = os.path.basename(probe)

    # The form as a separate argument.
    r = run([rr, "--stats", "json", probe, "alloc"])
    check(r.returncode == 0, "--stats json: exit 0", r.stderr)
    try:
        report = json.loads(r.stderr)
        check(report["process"]["program"] == probe_name, "--stats json: program",
              r.stderr[:200])
        check(report["totals"]["allocations"] > 0, "--stats json: allocations")
    except (ValueError, KeyError) as e:
        check(False, "--stats json: one JSON object on stderr", f"{e}: {r.stderr[:300]}")
    r = run([rr, "--stats", "text", "--", probe, "alloc"])
    check(r.returncode == 0 and HEADER.search(r.stderr) is not None,
          "--stats text: the text report", r.stderr[:300])
    r = run([rr, "--stats=xml", probe, "alloc"])
    check(r.returncode == 2 and r.stderr.startswith(
        "roost-run: --stats takes text or json, not xml\n"), "--stats=xml refused", r.stderr)

    # Every process reports, each under its own pid; --no-children keeps the
    # program's own.  sh runs the probe twice: first as a child, then by exec
    # (the pid roost-run had, as sh had it).
    script = f'"{probe}" fork >/dev/null; exec "{probe}" alloc'
    r = run([rr, "--stats", "--", "sh", "-c", script])
    pids = HEADER.findall(r.stderr)
    check(r.returncode == 0, "--stats: exit 0", r.stderr[-300:])
    check(len(pids) == 3 and all(name == probe_name for _, name in pids)
          and len({pid for pid, _ in pids}) == 3,
          "--stats: three reports (the child sh starts, its child, the program sh execs), "
          "each naming its own pid and the probe", repr(pids))
    r = run([rr, "--stats", "--no-children", "--", "sh", "-c", script])
    pids = HEADER.findall(r.stderr)
    check(r.returncode == 0, "--no-children: exit 0", r.stderr[-300:])
    check(len(pids) == 1 and pids[0][1] == probe_name,
          "--no-children: only the exec'd program's report", repr(pids))

    # Unknown options.
    for given, said in (("batch_it=0", "unknown option batch_it (did you mean batchit?)"),
                        ("ROOST_BATCH_IT=0",
                         "unknown option ROOST_BATCH_IT (did you mean ROOST_BATCHIT?)"),
                        ("PURGE_DELAI=5", "unknown option PURGE_DELAI (did you mean PURGE_DELAY?)"),
                        ("xyzzy=1", "unknown option xyzzy")):
        r = run([rr, "--option", given, probe, "alloc"])
        check(r.returncode == 2 and r.stderr.splitlines()[:1] == ["roost-run: " + said],
              f"--option {given}", r.stderr)

    # Each level's library: the program sees it (alone) in LD_PRELOAD, and
    # runs on it.
    for flag, stem in (("", "libroost.so."), ("--secure", "libroost-secure.so."),
                       ("--hardened", "libroost-hardened.so.")):
        r = run([rr] + ([flag] if flag else []) + ["--stats=json", "--", "sh", "-c",
                                                  f'echo "$LD_PRELOAD"; exec "{probe}" alloc'])
        preload = r.stdout.splitlines()[:1]
        check(r.returncode == 0 and len(preload) == 1 and
              os.path.basename(preload[0]).startswith(stem) and ":" not in preload[0],
              f"roost-run {flag or '(no level)'}: LD_PRELOAD is {stem}*", r.stdout + r.stderr)
        check(r.stderr.count('"allocations"') >= 1, f"roost-run {flag}: the program ran on it",
              r.stderr[:300])

    # An unset path option in the verbose print.
    r = run([rr, "--verbose", probe, "alloc"])
    check("roost: ROOST_STATS_FILE= (unset)\n" in r.stderr, "--verbose: (unset)", r.stderr)

    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print("roost-run: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
