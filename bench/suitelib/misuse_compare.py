"""Roost's misuse catalog under other allocators (command: bench/misuse_compare.py).

Owns: building the catalog binary (build/release/tests/roost_misuse_catalog, linked with no
allocator of ours) and the allocators it is compared under, running it in observe mode
(ROOSTTEST_BUILD=observe: each case runs its misuse in a forked child and records what became
of the child as the gtest properties `outcome` and `stderr`, then skips) once per allocator and
run, sorting each outcome into a few kinds, and the Markdown report. It must never judge roost
against the catalog's own expectations (ctest's misuse_catalog.* tests do that), never edit
the catalog or the build's configuration, and never let one allocator's failure (not loaded,
hung, the catalog process killed) cost the others their columns.

    python3 bench/misuse_compare.py                          # the default allocators
    python3 bench/misuse_compare.py --allocators glibc,roost-secure --runs 1 --filter 'DoubleFree.*'

An outcome is one of (cells of the table):
    caught     killed by SIGABRT after a message on stderr (the message is recorded)
    abort      killed by SIGABRT with nothing on stderr
    trap       killed by SIGILL or SIGTRAP (__builtin_trap) with nothing on stderr
    crash N    killed by signal N (SIGSEGV 11, SIGBUS 7, SIGFPE 8, ...)
    hung       killed by the catalog's own 30 s alarm (SIGALRM) in the child
    warned     exited 0 after a message on stderr: noticed, and ran on
    ran on     exited 0 with nothing on stderr: not caught
    exit N     exited N (not 0, not the catalog's 3) after its message
    n/a        the case did not observe the allocator: the test failed, was skipped, did not
               run, its child's own check failed (exit 3), or the case calls a function the
               process does not have (see below); the notes say why

A case calls free_sized and free_aligned_sized (C23) through weak declarations, asserting
their addresses first; the script also reads, from the catalog's source, which of them each
case needs, asks every allocator's process (a preloaded Python) whether it has them, and shows
a case that needs a missing one as n/a.

Runs: the catalog runs whole once per allocator and run (--runs, default 3: some outcomes
depend on the addresses a run gets); a cell lists every outcome seen when the runs disagree.
A run that times out (--timeout) or ends without its XML report (the catalog's own process
died) is read from its console output instead (the skip message of an observed case is
"<outcome>: <first stderr line>"), and every case it did not get to is run alone, each with
--case-timeout.
"""

import argparse
import collections
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

from . import allocators, peers
from .common import REPO, last_lines, log, parse_list, rel
from .measure import run_env

DEFAULT_ALLOCATORS = ["glibc", "roost", "roost-secure", "roost-hardened", "snmalloc",
                      "snmalloc-checks",
                      "mimalloc-v2", "mimalloc-v2-secure", "mimalloc-v3-secure", "scudo",
                      "hardened_malloc"]
CATALOG = os.path.join("tests", "roost_misuse_catalog")   # in the build directory
CATALOG_SOURCE = os.path.join(REPO, "tests", "misuse_catalog_test.cc")
TARGETS = ["roost_misuse_catalog", "roost", "roost_secure", "roost_hardened"]
MESSAGE_WIDTH = 80

# The kinds, in the order the counts table shows them.
CAUGHT, ABORT, TRAP, CRASH, HUNG, WARNED, EXITED, RAN_ON, NA = (
    "caught", "abort", "trap", "crash", "hung", "warned", "exit", "ran on", "n/a")
KINDS = [CAUGHT, ABORT, TRAP, CRASH, HUNG, WARNED, EXITED, RAN_ON, NA]
CHILD_CHECK_EXIT = 3   # tests/support.h: child_check() failed in the child


# --- building ---------------------------------------------------------------------------


def build(build_dir, jobs):
    """Configures build_dir if it is the Makefile's build/release and not configured yet, then
    builds the catalog and both roost libraries. Returns None, or why the build failed."""
    if not os.path.isfile(os.path.join(build_dir, "CMakeCache.txt")):
        if os.path.realpath(build_dir) != os.path.realpath(os.path.join(REPO, "build",
                                                                           "release")):
            return f"{rel(build_dir)} is not configured (configure it, or use build/release)"
        log("misuse_compare: configuring build/release (make build/release/.configured)")
        r = subprocess.run(["make", "-C", REPO, "build/release/.configured"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return f"configuring build/release failed: {last_lines(r.stderr + r.stdout, 3)}"
    cmd = ["cmake", "--build", build_dir, "--target"] + TARGETS + ["-j", str(jobs)]
    log(f"misuse_compare: {' '.join(cmd)}")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return f"`{' '.join(cmd)}` failed: {last_lines(r.stdout + r.stderr, 3)}"
    return None


# --- what the cases need ----------------------------------------------------------------


def required_functions(source):
    """{Suite.Name: [weak function the case asserts is there]} from the catalog's source."""
    try:
        with open(source) as f:
            text = f.read()
    except OSError:
        return {}
    weak = set(re.findall(r"(\w+)\s*\([^;()]*\)\s*__attribute__\(\(weak\)\)", text))
    needs = {}
    tests = list(re.finditer(r"^TEST(?:_F)?\(\s*(\w+)\s*,\s*(\w+)\s*\)", text, re.M))
    for i, m in enumerate(tests):
        end = tests[i + 1].start() if i + 1 < len(tests) else len(text)
        body = text[m.end():end]
        asserted = re.findall(r"(?:ASSERT|EXPECT)_NE\(\s*&?\s*(\w+)\s*,\s*nullptr\s*\)", body)
        names = [n for n in dict.fromkeys(asserted) if n in weak]
        if names:
            needs[f"{m.group(1)}.{m.group(2)}"] = names
    return needs


_HAS_FUNCTIONS = r"""
import ctypes, sys
g = ctypes.CDLL(None)
print(" ".join(n for n in sys.argv[1:] if hasattr(g, n)))
"""


def functions_present(alloc, names, timeout=60):
    """Which of `names` a process running under `alloc` resolves (None if it cannot tell)."""
    if not names:
        return set()
    try:
        r = subprocess.run([sys.executable, "-c", _HAS_FUNCTIONS] + sorted(names),
                           env=run_env(alloc.lib, alloc.env), capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    return set(r.stdout.split()) if r.returncode == 0 else None


# --- running the catalog ----------------------------------------------------------------


def catalog_env(alloc):
    env = run_env(alloc.lib, alloc.env)
    for k in list(env):
        if k.startswith(("GTEST_", "ROOSTTEST_")):
            del env[k]
    env["ROOSTTEST_BUILD"] = "observe"
    return env


def list_cases(binary, gtest_filter):
    """The catalog's cases as Suite.Name, in its order (listed without a preload)."""
    cmd = [binary, "--gtest_list_tests"] + ([f"--gtest_filter={gtest_filter}"]
                                            if gtest_filter else [])
    r = subprocess.run(cmd, env=run_env(), capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` exited {r.returncode}: {last_lines(r.stderr)}")
    cases, suite = [], None
    for line in r.stdout.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            suite = line.split("#")[0].strip().rstrip(".")
        elif suite:
            cases.append(f"{suite}.{line.split('#')[0].strip()}")
    return cases


def run_gtest(binary, env, gtest_filter, timeout):
    """One catalog process. Returns (its parsed XML report or None, what went wrong or None,
    its stdout and stderr)."""
    with tempfile.TemporaryDirectory(prefix="roost-misuse-") as tmp:
        xml = os.path.join(tmp, "report.xml")
        out = os.path.join(tmp, "output")
        cmd = [binary, f"--gtest_output=xml:{xml}"]
        if gtest_filter:
            cmd.append(f"--gtest_filter={gtest_filter}")
        problem = None
        with open(out, "w") as outf:
            # Its own session: a timeout kills the catalog and the children it forked.
            p = subprocess.Popen(cmd, env=env, stdout=outf, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                status = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                status = None
                problem = f"killed after {timeout:g} s"
        if status is not None and status < 0:
            problem = f"the catalog process was killed by signal {-status}"
        with open(out, errors="replace") as f:
            output = f.read()
        report = None
        if os.path.exists(xml):
            try:
                report = parse_report(ET.parse(xml))
            except ET.ParseError as e:
                problem = problem or f"its XML report does not parse: {e}"
        elif problem is None:
            problem = f"the catalog process exited {status} without its XML report"
        if report is None:
            report = parse_console(output)
        return report, problem, output


def parse_console(output):
    """What the cases of a run that wrote no XML report had observed, from gtest's console
    output: each observed case's skip message is "<outcome>: <first stderr line>"."""
    cases = {}
    for m in re.finditer(r"^\[ RUN +\] (\S+)\n(.*?)(?=^\[ RUN |\Z)", output, re.M | re.S):
        found = re.search(r": Skipped\n(exited -?\d+|signal \d+): ?([^\n]*)", m.group(2))
        if found:
            cases[m.group(1)] = {"outcome": found.group(1), "stderr": found.group(2),
                                 "failure": None, "skipped": None, "status": "run",
                                 "from_console": True}
    return cases


def parse_report(tree):
    """{Suite.Name: {"outcome", "stderr", "failure", "skipped", "status"}} from gtest's XML."""
    cases = {}
    for tc in tree.getroot().iter("testcase"):
        name = f"{tc.get('classname')}.{tc.get('name')}"
        props = {p.get("name"): p.get("value", "") for p in tc.iter("property")}
        failure = tc.find("failure")
        skipped = tc.find("skipped")
        cases[name] = {
            "outcome": props.get("outcome"),
            "stderr": props.get("stderr", ""),
            "failure": gtest_message(failure.get("message", "")) if failure is not None else None,
            "skipped": gtest_message(skipped.get("message", "")) if skipped is not None else None,
            "status": tc.get("status", ""),
        }
    return cases


def gtest_message(message):
    """A failure or skip message without its leading `file:line` line, on one line."""
    lines = [l.strip() for l in message.splitlines() if l.strip()]
    if lines and re.match(r"^\S+:\d+$", lines[0]):
        lines = lines[1:]
    return " ".join(lines) or "?"


def observe(binary, alloc, cases, gtest_filter, timeout, case_timeout):
    """One observe-mode run of the catalog under alloc: ({case: record}, [notes], preload
    error or None). Cases the whole run did not report are run one by one."""
    env = catalog_env(alloc)
    report, problem, output = run_gtest(binary, env, gtest_filter, timeout)
    if alloc.lib and "cannot be preloaded" in output:
        return {}, [], last_lines(output)
    notes = []
    missing = [c for c in cases if c not in report]
    if problem:
        started = re.findall(r"^\[ RUN +\] (\S+)$", output, re.M)
        during = f" during {started[-1]}" if started else ""
        notes.append(f"the whole run: {problem}{during}; the outcomes it printed were read "
                     f"from its console output, the {len(missing)} case(s) after them run one "
                     "by one")
    for case in missing if problem else []:
        one, why, _ = run_gtest(binary, env, case, case_timeout)
        if case in one:
            report[case] = one[case]
            if why:
                notes.append(f"{case} run alone: {why}, after its child's outcome "
                             "(read from the console output)")
        else:
            report[case] = {"outcome": None, "stderr": "", "failure": None, "skipped": None,
                            "status": "", "lost": why or "no report"}
    return report, notes, None


# --- classifying ------------------------------------------------------------------------


def classify(rec, missing_functions):
    """(kind, cell, message or None, n/a reason or None) of one case's record in one run."""
    if rec is None:
        return NA, NA, None, "not in the catalog run's report"
    if missing_functions and rec.get("outcome") is not None:
        return NA, NA, None, (f"no {', '.join(missing_functions)} in the process "
                              f"(the child: {rec['outcome']})")
    outcome, msg = rec.get("outcome"), (rec.get("stderr") or "").strip()
    if outcome is None:
        if rec.get("lost"):
            return NA, NA, None, (f"the catalog's own process (not the child) did not finish "
                                  f"even with this case alone: {rec['lost']}")
        if rec.get("failure"):
            return NA, NA, None, f"the test failed: {rec['failure']}"
        if rec.get("skipped"):
            return NA, NA, None, f"skipped: {rec['skipped']}"
        return NA, NA, None, f"no outcome recorded (status {rec.get('status') or '?'})"
    m = re.match(r"(exited|signal) (-?\d+)$", outcome)
    if not m:
        return NA, NA, None, f"unreadable outcome {outcome!r}"
    n = int(m.group(2))
    if m.group(1) == "exited":
        if n == 0:
            return (WARNED, WARNED, msg, None) if msg else (RAN_ON, RAN_ON, None, None)
        if n == CHILD_CHECK_EXIT:
            return NA, NA, None, f"the child's own check failed: {msg or '?'}"
        return EXITED, f"exit {n}", msg or None, None
    if n == signal.SIGABRT:
        return (CAUGHT, CAUGHT, msg, None) if msg else (ABORT, ABORT, None, None)
    if n in (signal.SIGILL, signal.SIGTRAP):
        return TRAP, TRAP if not msg else f"trap {n}", msg or None, None
    if n == signal.SIGALRM:
        return HUNG, HUNG, msg or None, None
    return CRASH, f"crash {n}", msg or None, None


def summarise(records_per_run, missing_functions):
    """One case under one allocator over its runs: (kind counted, cell, [messages],
    [n/a reasons])."""
    seen = collections.Counter()
    kinds = collections.Counter()
    messages, reasons = [], []
    for rec in records_per_run:
        kind, cell, msg, why = classify(rec, missing_functions)
        seen[cell] += 1
        kinds[kind] += 1
        if msg:
            messages.append(msg)
        if why and why not in reasons:
            reasons.append(why)
    kind = kinds.most_common(1)[0][0]
    if len(seen) == 1:
        cell = next(iter(seen))
    else:
        cell = " / ".join(f"{c} ×{k}" for c, k in seen.most_common())
    return kind, cell, messages, reasons


def normalise(message):
    """A diagnostic with its addresses and numbers replaced, truncated for the table."""
    s = re.sub(r"0[xX][0-9a-fA-F]+", "0x…", message)
    s = re.sub(r"(?<![\w…])\d+(?!x…)", "N", s)
    s = " ".join(s.split())
    return s if len(s) <= MESSAGE_WIDTH else s[:MESSAGE_WIDTH - 1] + "…"


def md(text):
    return str(text).replace("|", "\\|")


# --- the report -------------------------------------------------------------------------


def report_markdown(allocs, cases, table, notes, runs, command, build_problem, excluded):
    """The whole report as Markdown lines."""
    commit, dirty, _ = allocators.git_commit()
    live = [a for a in allocs if not a.missing]
    lines = [f"Misuse catalog (`{rel(CATALOG_SOURCE)}`) in observe mode, "
             f"{runs} run(s) per allocator; roost at {commit or '?'}{'+dirty' if dirty else ''}, "
             f"{time.strftime('%Y-%m-%d')}. Command: `{command}`", ""]
    if build_problem:
        lines += [f"**The build failed** ({md(build_problem)}): the files of the previous "
                  "build were used.", ""]
    lines += ["| allocator | version | library | source |", "|---|---|---|---|"]
    for a in allocs:
        lib = f"`{rel(a.shown)}`" if a.lib else "none (no preload)"
        env = " " + " ".join(f"`{k}={v}`" for k, v in sorted(a.env.items())) if a.env else ""
        if a.missing:
            lines.append(f"| {a.name} | | **not loaded** | {md(a.missing)} |")
        else:
            lines.append(f"| {a.name} | {a.version or '?'} | {lib}{env} | {md(a.source)} |")
    lines += ["", "| case | " + " | ".join(a.name for a in allocs) + " |",
              "|---|" + "---|" * len(allocs)]
    for case in cases:
        cells = []
        for a in allocs:
            cells.append("not loaded" if a.missing else md(table[a.name][case][1]))
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    lines += ["", "Cells: caught = SIGABRT after a message on stderr; abort = SIGABRT, no "
              "message; trap = SIGILL/SIGTRAP, no message; crash N = killed by signal N; hung = "
              "the child's 30 s alarm; warned = a message, then exit 0; ran on = exit 0, no "
              "message; n/a = the case could not observe the allocator (below). "
              "\"a ×2 / b ×1\": the runs disagreed (the counts take the most frequent).", ""]
    counts = {a.name: collections.Counter(table[a.name][c][0] for c in cases) for a in live}
    shown = [k for k in KINDS[1:] if any(counts[n][k] for n in counts)]  # no all-zero columns
    lines += [f"| allocator | caught / {len(cases)} | " + " | ".join(shown) + " |",
              "|---|" + "---:|" * (1 + len(shown))]
    for a in live:
        lines.append(f"| {a.name} | {counts[a.name][CAUGHT]} | " +
                     " | ".join(str(counts[a.name][k]) for k in shown) + " |")
    lines += ["", "Diagnostics, first line of the child's stderr (addresses as 0x…, numbers "
              f"as N, cut at {MESSAGE_WIDTH} characters), with the number of cases that "
              "printed each:", "", "| allocator | message | cases |", "|---|---|---:|"]
    silent = []
    for a in live:
        per = collections.OrderedDict()
        for c in cases:
            for m in dict.fromkeys(normalise(x) for x in table[a.name][c][2]):
                per.setdefault(m, set()).add(c)
        if not per:
            silent.append(a.name)
        for m, cs in per.items():
            lines.append(f"| {a.name} | `{m.replace('`', chr(39))}` | {len(cs)} |")
    if silent:
        lines += ["", "No message on any case: " + ", ".join(silent) + "."]
    na = collections.OrderedDict()  # reason -> case -> allocators
    for a in live:
        for c in cases:
            for why in table[a.name][c][3]:
                na.setdefault(why, collections.OrderedDict()).setdefault(c, []).append(a.name)
    if na:
        lines += ["", "Why n/a:", ""]
        for why, where in na.items():
            lines.append(f"- {md(why)}: " +
                         "; ".join(f"{c} ({', '.join(names)})" for c, names in where.items()))
    if excluded:
        lines += ["", "Not shown (no outcome under any allocator: cases that are not misuse, "
                  "skipped in observe mode): " + ", ".join(excluded) + "."]
    for a in allocs:
        for n in notes.get(a.name, []):
            lines.append(f"\n{a.name}: {md(n)}")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Runs roost's misuse catalog (tests/misuse_catalog_test.cc) in observe mode "
                    "under glibc, roost's three builds, the peers' hardened builds, scudo and "
                    "hardened_malloc, and prints what each allocator did with each misuse as "
                    "Markdown tables.",
        epilog=__doc__[__doc__.index("An outcome is one of"):],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--allocators", default=",".join(DEFAULT_ALLOCATORS),
                    help="comma-separated allocators as bench/suite.py names them, "
                         "NAME@VAR=VALUE for extra environment (default: %(default)s)")
    ap.add_argument("--runs", type=int, default=3,
                    help="catalog runs per allocator (default: %(default)s)")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds one allocator's catalog run may take (default: %(default)s)")
    ap.add_argument("--case-timeout", type=float, default=60.0,
                    help="seconds for one case run alone, after a run that did not finish "
                         "(default: %(default)s; the catalog's child has a 30 s alarm)")
    ap.add_argument("--filter", default="",
                    help="a gtest filter, e.g. 'DoubleFree.*' (default: every case)")
    ap.add_argument("--out", help="also write the Markdown report to this file")
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build", "release"),
                    help="the roost build with the catalog and roost's three libraries "
                         "(default: build/release)")
    ap.add_argument("--peers-dir", default=os.path.join(REPO, "build", "peers"),
                    help="where peers.py builds the peers (default: build/peers)")
    ap.add_argument("--jobs", type=int, default=min(2, peers.nproc()),
                    help="build jobs (default: %(default)s)")
    ap.add_argument("--no-build", action="store_true",
                    help="build nothing of roost's: use the catalog and libraries as they are")
    ap.add_argument("--no-install", action="store_true",
                    help="install, fetch and build no peers: what is missing is shown so")
    opts = ap.parse_args(argv)
    if opts.runs < 1:
        ap.error("--runs must be at least 1")
    names = parse_list(opts.allocators)
    if not names:
        ap.error("no allocators")
    known = ({allocators.ROOST, allocators.GLIBC} | set(allocators.VARIANTS)
             | set(peers.PEER_NAMES))
    bad = [n for n in names if n.partition("@")[0] not in known]
    if bad:
        ap.error(f"unknown allocator(s) {', '.join(bad)}; known: {', '.join(sorted(known))}")
    build_dir = os.path.abspath(opts.build_dir)
    command = "python3 bench/misuse_compare.py" + "".join(
        f" {a}" for a in (argv if argv is not None else sys.argv[1:]))
    t0 = time.monotonic()

    build_problem = None if opts.no_build else build(build_dir, opts.jobs)
    if build_problem:
        log(f"misuse_compare: {build_problem}")
    binary = os.path.join(build_dir, CATALOG)
    if not os.access(binary, os.X_OK):
        log(f"misuse_compare: {rel(binary)} is not built")
        return 1

    allocs = allocators.resolve_allocators(names, build_dir, not opts.no_install, opts.peers_dir)
    for a in allocs:
        if a.lib and not a.missing:
            err = peers.preload_check(a.lib)
            if err:
                a.missing = err
    try:
        cases = list_cases(binary, opts.filter)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        log(f"misuse_compare: cannot list the catalog's cases: {e}")
        return 1
    if not cases:
        log(f"misuse_compare: no case matches --filter {opts.filter!r}")
        return 1
    needs = required_functions(CATALOG_SOURCE)
    wanted = {n for c in cases for n in needs.get(c, [])}

    table, notes = {}, {}
    for a in allocs:
        if a.missing:
            log(f"misuse_compare: {a.name}: not loaded: {a.missing}")
            continue
        present = functions_present(a, wanted)
        runs, notes[a.name] = [], []
        t = time.monotonic()
        for _ in range(opts.runs):
            report, run_notes, preload_error = observe(binary, a, cases, opts.filter,
                                                       opts.timeout, opts.case_timeout)
            if preload_error:
                a.missing = f"the catalog could not preload it: {preload_error}"
                break
            runs.append(report)
            notes[a.name] += [n for n in run_notes if n not in notes[a.name]]
        if a.missing:
            log(f"misuse_compare: {a.name}: not loaded: {a.missing}")
            continue
        table[a.name] = {}
        for c in cases:
            lacking = [n for n in needs.get(c, []) if present is not None and n not in present]
            table[a.name][c] = summarise([r.get(c) for r in runs], lacking)
        caught = sum(1 for c in cases if table[a.name][c][0] == CAUGHT)
        log(f"misuse_compare: {a.name}: caught {caught} ({opts.runs} run(s), "
            f"{time.monotonic() - t:.1f} s)")

    # A case every allocator skipped (HardenedReuse.*, the right sizes) is not a misuse case.
    def skipped_everywhere(case):
        return table and all(table[n][case][0] == NA and table[n][case][3] and
                             all(w.startswith("skipped:") for w in table[n][case][3])
                             for n in table)
    observed = [c for c in cases if not skipped_everywhere(c)]
    excluded = [c for c in cases if c not in observed]
    lines = report_markdown(allocs, observed, table, notes, opts.runs, command, build_problem,
                            excluded)
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if opts.out:
        with open(opts.out, "w") as f:
            f.write(text)
        log(f"misuse_compare: wrote {opts.out}")
    log(f"misuse_compare: {time.monotonic() - t0:.0f} s")
    return 1 if any(a.missing for a in allocs) else 0
