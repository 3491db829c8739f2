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
  - `--profile` under a shell that starts children: every process writes a
    profile and names it in one line on stderr, by its absolute path; with
    `--no-children` only the program roost-run starts (and what it execs)
    does, not its fork children either, the leak report to a file
    (`ROOST_PROFILE=leaks`) too; a run without a profile says nothing of one;
  - `--option NAME=VALUE` with an unknown NAME says "did you mean" when an
    option is within two edits, written as NAME was;
  - an unknown flag says "did you mean" when it begins a flag (`--stat`,
    `--no-child`) or is within two edits of one, its value kept
    (`--stat=json`: `--stats=json`); exit status 2;
  - `--secure` and `--hardened` preload their level's library;
  - ROOST_VERBOSE's line of an unset path option says "(unset)".
Exits 1 with every failure listed.
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

failures = []


def check(ok, what, detail=""):
    if not ok:
        failures.append(what + (": " + detail if detail else ""))


def run(args, env_extra=None, cwd=None):
    """The command's CompletedProcess, with `pid` added: roost-run's process id, which the
    program it runs keeps (exec)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ROOST_") and k != "LD_PRELOAD"}
    env.update(env_extra or {})
    with subprocess.Popen(args, env=env, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as p:
        out, err = p.communicate(timeout=60)
    r = subprocess.CompletedProcess(args, p.returncode, out, err)
    r.pid = p.pid
    return r


WRITTEN = re.compile(r"^roost: (heap profile|leak report) of pid ([0-9]+) \((.*)\) written to "
                     r"(.*)$", re.M)


def check_profiles(r, folder, pattern, what, expected_pids, probe_name, label):
    """The files `pattern` matches in `folder` are the profiles of expected_pids (one each,
    named by pid), and stderr has one line per file, naming it by its absolute path."""
    check(r.returncode == 0, f"{label}: exit 0", r.stderr[-300:])
    files = sorted(glob.glob(os.path.join(folder, pattern)))
    lines = WRITTEN.findall(r.stderr)
    pids = sorted(int(pid) for _, pid, _, _ in lines)
    check(pids == sorted(expected_pids), f"{label}: a line per process that writes",
          f"expected the pids {sorted(expected_pids)}, got {lines} from:\n{r.stderr}")
    check(len(files) == len(expected_pids), f"{label}: {len(expected_pids)} file(s) written",
          repr(files))
    real = os.path.realpath(folder)
    for kind, pid, name, path in lines:
        check(kind == what and name == probe_name, f"{label}: `{what} of pid {pid} "
              f"({probe_name})`", f"{kind} of {name}")
        check(os.path.isabs(path) and os.path.dirname(path) == real and
              os.path.isfile(path) and pid in os.path.basename(path),
              f"{label}: the line names the file it wrote, absolute", path)


HEADER = re.compile(r"^roost: report of pid ([0-9]+) \((.*)\) at "
                    r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} UTC$", re.M)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--roost-run", required=True)
    ap.add_argument("--probe", required=True)
    args = ap.parse_args()
    rr, probe = os.path.abspath(args.roost_run), os.path.abspath(args.probe)
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

    # Profiles: by default every process of the environment writes one, and
    # each says where.  The shell (roost-run's pid) starts two children (one
    # of which forks a third), then execs the program: four profiles, in the
    # working directory (roost.%p.heap); with --no-children, only the one of
    # the program the shell execs, which has roost-run's pid.
    shim = f'"{probe}" fork >/dev/null; "{probe}" alloc; exec "{probe}" alloc'
    with tempfile.TemporaryDirectory(prefix="roost-run-check.") as work:
        r = run([rr, "--profile", "--", "sh", "-c", shim], cwd=work)
        pids = [int(os.path.basename(f).split(".")[1])
                for f in glob.glob(os.path.join(work, "roost.*.heap"))]
        check(len(pids) == 4 and r.pid in pids, "--profile: four profiles, one the program's",
              repr(pids))
        check_profiles(r, work, "roost.*.heap", "heap profile", pids, probe_name, "--profile")
        for f in glob.glob(os.path.join(work, "*")):
            os.unlink(f)
        r = run([rr, "--profile", "--no-children", "--", "sh", "-c", shim], cwd=work)
        check_profiles(r, work, "roost.*.heap", "heap profile", [r.pid], probe_name,
                       "--profile --no-children")
        # A fork child of the program inherits its profiler running, and
        # writes nothing either.
        for f in glob.glob(os.path.join(work, "*")):
            os.unlink(f)
        r = run([rr, "--profile", "--no-children", "--", probe, "fork"], cwd=work)
        check_profiles(r, work, "roost.*.heap", "heap profile", [r.pid], probe_name,
                       "--profile --no-children, the program forks")
        # The leak report to a file: the same rule, the same line (the path
        # made absolute without its "./").
        r = run([rr, "--no-children", "--profile=./leaks.%p.txt", "--option",
                 "ROOST_PROFILE=leaks", "--", "sh", "-c", shim], cwd=work)
        check_profiles(r, work, "leaks.*.txt", "leak report", [r.pid], probe_name,
                       "--no-children, ROOST_PROFILE=leaks to a file")
        # No profile asked for: no line, no file.
        for f in glob.glob(os.path.join(work, "*")):
            os.unlink(f)
        r = run([rr, "--stats", "--", "sh", "-c", shim], cwd=work)
        check(WRITTEN.search(r.stderr) is None and not os.listdir(work),
              "no profile asked for: nothing said, nothing written", r.stderr[-300:])

    # Unknown flags: "did you mean" for what begins a flag or is within two
    # edits of one; exit 2 either way, and the program does not run.
    for given, said in (("--stat", "unknown argument --stat (did you mean --stats?)"),
                        ("--no-child", "unknown argument --no-child (did you mean --no-children?)"),
                        ("--profil", "unknown argument --profil (did you mean --profile?)"),
                        ("--stat=json",
                         "unknown argument --stat=json (did you mean --stats=json?)"),
                        ("--profle=x.heap",
                         "unknown argument --profle=x.heap (did you mean --profile=x.heap?)"),
                        ("--hardend", "unknown argument --hardend (did you mean --hardened?)"),
                        ("--no-chidlren",
                         "unknown argument --no-chidlren (did you mean --no-children?)"),
                        ("--verbos=1", "unknown argument --verbos=1 (did you mean --verbose?)"),
                        ("--verbose=1", "unknown argument --verbose=1 (--verbose takes no value)"),
                        ("--timline=x.html",
                         "unknown argument --timline=x.html (did you mean --timeline=x.html?)"),
                        ("--interva", "unknown argument --interva (did you mean --interval?)"),
                        ("--s", "unknown argument --s"),
                        ("--xyzzy", "unknown argument --xyzzy")):
        r = run([rr, given, probe, "alloc"])
        check(r.returncode == 2 and r.stderr.splitlines() == [
            "roost-run: " + said, "roost-run: try 'roost-run --help'"] and r.stdout == "",
            f"roost-run {given}", f"exit {r.returncode}: {r.stderr}")

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
