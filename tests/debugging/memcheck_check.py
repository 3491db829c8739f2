#!/usr/bin/env python3
"""tests/debugging/memcheck_check.py — valgrind's memcheck reports the same
on roost's ROOST_VALGRIND build as on glibc's malloc.

Runs tests/debugging/probe.c built twice, on glibc's malloc (--glibc) and on
roost (--roost), under `valgrind --leak-check=full`, and compares what
matters in the two reports:

  - each error, in order: its kind ("Invalid read of size 4",
    "Conditional jump or move depends on uninitialised value(s)", "128 bytes
    in 1 blocks are definitely lost"), the first frame in the probe's source
    (function, file and line), and where the address lies ("is 4 bytes
    inside a block of size 64 free'd");
  - the leak summary's "definitely lost" and "indirectly lost" lines;
  - "ERROR SUMMARY: N errors from N contexts".

The glibc report must also hold the probe's four bugs, so that two empty
reports never pass.  --roost-arg passes an option to valgrind for the roost
run only (a program linked to libroost.a needs
--soname-synonyms=somalloc=nouserintercepts, or valgrind puts its own
malloc in roost's place).  Exit 0 when the reports agree; 1, printing both
summaries and both reports, otherwise.

Usage:
  memcheck_check.py [--valgrind V] --glibc PROG --roost PROG [--roost-arg A]...
"""
import argparse
import re
import subprocess
import sys

PREFIX = re.compile(r"^==\d+== ?")
FRAME = re.compile(r"^\s+(?:at|by) 0x[0-9A-Fa-f]+: (\S+) \(([^):]+):(\d+)\)")
ADDRESS = re.compile(r"^\s+Address 0x[0-9A-Fa-f]+ (is .*)$")
LOSS = re.compile(r" in loss record \d+ of \d+$")
# What the glibc report must say (the probe's four bugs).
EXPECTED = [
    "Invalid read of size 4",
    "Invalid write of size 1",
    "Conditional jump or move depends on uninitialised value(s)",
    "128 bytes in 1 blocks are definitely lost",
    "definitely lost: 128 bytes in 1 blocks",
    "ERROR SUMMARY: 4 errors from 4 contexts",
]


def run(valgrind, program, extra):
    command = [valgrind, "--leak-check=full", "--num-callers=30"] + extra + [program]
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)
    lines = [PREFIX.sub("", line) for line in done.stderr.splitlines()
             if PREFIX.match(line)]
    return done.returncode, lines, done.stderr


def essentials(lines, source):
    """The report's errors (kind, first frame in `source`, address) and
    summary lines, in order."""
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("ERROR SUMMARY:"):
            out.append(re.sub(r" \(suppressed.*\)$", "", line))
        elif re.match(r"^\s+(definitely|indirectly) lost: ", line):
            out.append(line.strip())
        elif line and not line[0].isspace() and (
                line.startswith("Invalid") or line.startswith("Conditional")
                or line.startswith("Use of uninitialised") or "are definitely lost" in line
                or "are indirectly lost" in line or "are possibly lost" in line
                or line.startswith("Mismatched")):
            record = [LOSS.sub("", line)]
            frame = None
            j = i + 1
            while j < len(lines) and lines[j] and lines[j][0].isspace():
                m = FRAME.match(lines[j])
                if m and frame is None and m.group(2).endswith(source):
                    frame = "%s (%s:%s)" % (m.group(1), m.group(2), m.group(3))
                a = ADDRESS.match(lines[j])
                if a:
                    record.append(a.group(1))
                    # The frames below say where it was freed or allocated.
                    break
                j += 1
            record.insert(1, frame or "(no frame in %s)" % source)
            out.append(" | ".join(record))
        i += 1
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--valgrind", default="valgrind")
    ap.add_argument("--glibc", required=True)
    ap.add_argument("--roost", required=True)
    ap.add_argument("--roost-arg", action="append", default=[])
    ap.add_argument("--source", default="probe.c")
    args = ap.parse_args()

    rc_glibc, glibc, glibc_text = run(args.valgrind, args.glibc, [])
    rc_roost, roost, roost_text = run(args.valgrind, args.roost, args.roost_arg)
    want = essentials(glibc, args.source)
    got = essentials(roost, args.source)
    failures = []
    joined = "\n".join(want)
    for e in EXPECTED:
        if e not in joined:
            failures.append("the glibc report lacks %r" % e)
    if rc_glibc != 0 or rc_roost != 0:
        failures.append("exit status: glibc %d, roost %d" % (rc_glibc, rc_roost))
    if want != got:
        failures.append("the reports differ")
    if failures:
        print("FAILED: " + "; ".join(failures))
        print("--- glibc's essentials:\n" + "\n".join(want))
        print("--- roost's essentials:\n" + "\n".join(got))
        print("--- glibc's report:\n" + glibc_text)
        print("--- roost's report:\n" + roost_text)
        return 1
    print("memcheck says the same of both (%d lines):\n%s" % (len(want), "\n".join(want)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
