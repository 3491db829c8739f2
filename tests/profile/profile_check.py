#!/usr/bin/env python3
"""The heap profiler's end-to-end checks: runs a test program with roost's
profiler on and reads what roost wrote, the heap profile through Debian's
google-pprof (package google-perftools, which .ci/run installs) and the
leak report as text.

  profile_check.py --roost-run PATH --program PATH --work DIR sites
      `roost-run --profile=FILE` at ROOST_PROFILE_RATE=4k, with periodic
      profiles every 16 MiB: `google-pprof --text` names site_a and site_b
      as the functions that allocated (flat = cumulative: no frame of
      roost's below them), each site's in-use and allocated bytes within 10 %
      of the truth the program prints, and the periodic profiles read too;
      stderr names every profile written (at exit and periodic), one line
      each, by its absolute path.
  ... apis
      ROOST_PROFILE_RATE=1 (every allocation sampled, estimates exact):
      each via_* function holds exactly what it allocated, as a leaf.
  profile_check.py --roost-lib PATH --program PATH --work DIR leak|clean
      ROOST_PROFILE=leaks at ROOST_PROFILE_RATE=1: `leak` writes the report
      to ROOST_PROFILE_FILE, which must list one stack, 200 objects of
      2 KiB, whose first frame addr2line names leak_here, and stderr must
      name that file; `clean` writes it to stderr, which must say that
      nothing is still allocated (and name no file).

The programs run with this environment less every ROOST_* variable but
ROOST_OFFLOAD (so that `make test-extended`'s offload pass covers the profiler too).
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys

TOLERANCE = 0.10


def fail(message):
    sys.exit("profile_check: " + message)


def environment(extra=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ROOST_") or k == "ROOST_OFFLOAD"}
    env.pop("LD_PRELOAD", None)
    env.update(extra or {})
    return env


def run(command, env, timeout=120):
    try:
        r = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail(f"no exit within {timeout} s: {' '.join(command)}")
    if r.returncode != 0:
        fail(f"exit status {r.returncode}: {' '.join(command)}\nstdout:\n{r.stdout}\n"
             f"stderr:\n{r.stderr}")
    return r


def pprof_tool():
    tool = shutil.which("google-pprof") or shutil.which("pprof")
    if tool is None:
        fail("google-pprof is not installed (Debian package google-perftools; .ci/run "
             "installs it)")
    return tool


def pprof_rows(program, profile, what):
    """{function: (flat bytes, cumulative bytes)} from google-pprof --text."""
    r = run([pprof_tool(), "--text", "--show_bytes", f"--{what}", program, profile],
            environment())
    rows = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(.+?)\s*$", line)
        if m:
            # One function: its clones ("f [clone .constprop.0]") and
            # overloads ("f(unsigned long)") summed.
            name = re.sub(r"\s*\[clone [^]]*\]", "", m.group(3))
            name = re.sub(r"^::", "", re.sub(r"\(.*$", "", name).strip())
            flat, cum = rows.get(name, (0, 0))
            rows[name] = (flat + int(m.group(1)), cum + int(m.group(2)))
    if not rows:
        fail(f"google-pprof printed no rows for {profile}:\n{r.stdout}\n{r.stderr}")
    return rows, r.stdout


WRITTEN = re.compile(r"^roost: (heap profile|leak report) of pid (\d+) \((.*)\) written to (.*)$",
                     re.M)


def check_named(stderr, what, files, program):
    """stderr has one line per file written, each naming its file by its absolute path (and
    the program that wrote it); nothing else said written."""
    said = WRITTEN.findall(stderr)
    named = sorted(path for _, _, _, path in said)
    want = sorted(os.path.realpath(f) for f in files)
    if named != want or any(k != what or n != os.path.basename(program) for k, _, n, _ in said):
        fail(f"stderr should name each {what} written, {want}; it says {said}:\n{stderr}")
    print(f"stderr names the {len(said)} file(s) written")


def check_sites(args):
    pattern = os.path.join(args.work, "sites.%p.heap")
    for old in glob.glob(os.path.join(args.work, "sites.*")):
        os.unlink(old)
    r = run([args.roost_run, f"--profile={pattern}", "--option", "ROOST_PROFILE_RATE=4k",
             "--option", "ROOST_PROFILE_INTERVAL=16m", "--", args.program, "sites"],
            environment())
    truth = {}
    for m in re.finditer(r"truth (site_[ab]) inuse=(\d+) alloc=(\d+)", r.stdout):
        truth[m.group(1)] = {"inuse_space": int(m.group(2)), "alloc_space": int(m.group(3))}
    if set(truth) != {"site_a", "site_b"}:
        fail(f"the program printed no truth:\n{r.stdout}\n{r.stderr}")
    final = glob.glob(os.path.join(args.work, "sites.*.heap"))
    if len(final) != 1:
        fail(f"expected one profile at exit in {args.work}, found {final}")
    problems = []
    for what in ("inuse_space", "alloc_space"):
        rows, text = pprof_rows(args.program, final[0], what)
        for site in ("site_a", "site_b"):
            if site not in rows:
                fail(f"google-pprof --{what} does not name {site}:\n{text}")
            flat, cum = rows[site]
            want = truth[site][what]
            error = (cum - want) / want
            print(f"{site} {what}: profile {cum} bytes, truth {want} bytes ({error:+.1%})")
            if abs(error) > TOLERANCE:
                problems.append(f"{site} {what} off by {error:+.1%}")
            if flat != cum:
                problems.append(f"{site} {what}: flat {flat} != cumulative {cum} (a frame "
                                f"below it)")
    periodic = sorted(glob.glob(os.path.join(args.work, "sites.*.heap.*")))
    print(f"{len(periodic)} periodic profiles")
    if len(periodic) < 2:
        problems.append(f"expected periodic profiles (every 16 MiB of 64), found {periodic}")
    for p in periodic:
        rows, _ = pprof_rows(args.program, p, "alloc_space")
        if "site_a" not in rows:
            problems.append(f"periodic profile {p} names no site_a")
    if problems:
        fail("; ".join(problems))
    check_named(r.stderr, "heap profile", final + periodic, args.program)


APIS = {"via_malloc": 65536, "via_calloc": 65536, "via_realloc": 65536,
        "via_aligned_alloc": 65536, "via_posix_memalign": 65536, "via_memalign": 65536,
        "via_new": 65536, "via_malloc_large": 524288}


def check_apis(args):
    profile = os.path.join(args.work, "apis.heap")
    if os.path.exists(profile):
        os.unlink(profile)
    run([args.roost_run, f"--profile={profile}", "--option", "ROOST_PROFILE_RATE=1", "--",
         args.program, "apis"], environment())
    rows, text = pprof_rows(args.program, profile, "inuse_space")
    problems = []
    for name, want in APIS.items():
        got = rows.get(name)
        if got != (want, want):
            problems.append(f"{name}: (flat, cumulative) {got}, want ({want}, {want})")
    if problems:
        fail("; ".join(problems) + "\n" + text)
    print(f"{len(APIS)} allocation calls each attributed exactly to their caller")


def leak_stacks(report):
    """[(bytes, objects, [(object, file address)])] from a leak report."""
    stacks = []
    for line in report.splitlines():
        m = re.match(r"roost: about (\d+) bytes in (\d+) objects? \(", line)
        if m:
            stacks.append((int(m.group(1)), int(m.group(2)), []))
            continue
        m = re.match(r"roost:\s+#\d+ 0x[0-9a-f]+.*\((.+)\+(0x[0-9a-f]+)\)$", line)
        if m and stacks:
            stacks[-1][2].append((m.group(1), m.group(2)))
    return stacks


def check_leak(args, leak):
    settings = {"ROOST_PROFILE": "leaks", "ROOST_PROFILE_RATE": "1",
                "LD_PRELOAD": args.roost_lib}
    report_file = os.path.join(args.work, "leak.txt")
    if leak:
        settings["ROOST_PROFILE_FILE"] = report_file
        if os.path.exists(report_file):
            os.unlink(report_file)
    r = run([args.program, "leak" if leak else "clean"], environment(settings))
    if not leak:
        if "roost: leak report: no sampled object is still allocated" not in r.stderr:
            fail(f"the clean program's report is not empty:\n{r.stderr}")
        check_named(r.stderr, "leak report", [], args.program)
        print("clean: " + r.stderr.strip())
        return
    check_named(r.stderr, "leak report", [report_file], args.program)
    with open(report_file) as f:
        report = f.read()
    print(report.rstrip())
    stacks = leak_stacks(report)
    if len(stacks) != 1 or stacks[0][:2] != (409600, 200):
        fail(f"expected one stack of 409600 bytes in 200 objects:\n{report}")
    obj, address = stacks[0][2][0]
    a2l = run(["addr2line", "-f", "-C", "-e", obj, address], environment())
    function = a2l.stdout.splitlines()[0] if a2l.stdout else ""
    if "leak_here" not in function:
        fail(f"the first frame ({obj}+{address}) is {function!r}, not leak_here")
    print(f"first frame {obj}+{address}: {function}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--roost-run")
    ap.add_argument("--roost-lib")
    ap.add_argument("--program", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("mode", choices=["sites", "apis", "leak", "clean"])
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if args.mode in ("sites", "apis") and not args.roost_run:
        ap.error("--roost-run is needed")
    if args.mode in ("leak", "clean") and not args.roost_lib:
        ap.error("--roost-lib is needed")
    {"sites": check_sites, "apis": check_apis,
     "leak": lambda a: check_leak(a, True), "clean": lambda a: check_leak(a, False)}[args.mode](args)


if __name__ == "__main__":
    main()
