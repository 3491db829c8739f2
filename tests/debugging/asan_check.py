#!/usr/bin/env python3
"""tests/debugging/asan_check.py — AddressSanitizer reports the program's
heap errors at the same lines with roost's ROOST_ASAN build as its malloc
as with its own.

Runs tests/debugging/probe.c built with -fsanitize=address
-fsanitize-recover=address twice, on ASan's own malloc (--own) and linked
to libroost-asan.a (--roost), with ASAN_OPTIONS=halt_on_error=0, and
compares the errors each reports, in order, by the first frame of each
("use_after_free probe.c:118"):

  - ASan's own malloc: a heap-use-after-free in use_after_free and a
    heap-buffer-overflow in overflow (and LeakSanitizer's leak of 128
    bytes in leak), so that two empty reports never pass;
  - roost's: the same two errors at the same frames, each a
    use-after-poison (roost poisons freed memory and memory not handed out
    through ASan's interface: ASan knows no more of it), and no other
    error (roost's own accesses, its thread, its start-up under ASan).

LeakSanitizer sees only the blocks of ASan's own malloc, so roost's leak is
not reported; the script says so and does not fail on it.

With --plain, also the probe built without ASan and linked to the same
library, run with ROOST_STATS=1: it must run to its end, its small
objects from slabs as in any build (large_allocations, in the report, at
most a tenth of allocations: the probe's large objects), not each as a
large object, as while ASan starts up.

Exit 0 when all holds; 1, printing the reports, otherwise.

Usage:
  asan_check.py --own PROG --roost PROG [--plain PROG] [--source probe.c]
"""
import argparse
import os
import re
import subprocess
import sys

ERROR = re.compile(r"^==\d+==ERROR: (AddressSanitizer|LeakSanitizer): ([a-z-]+|detected memory leaks)")
FRAME = re.compile(r"^\s+#\d+ 0x[0-9a-f]+ in (\S+) (\S+?):(\d+)")
LEAK = re.compile(r"^Direct leak of (\d+) byte\(s\) in (\d+) object\(s\)")


def run(program, extra_env=None):
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = "halt_on_error=0"
    env.update(extra_env or {})
    done = subprocess.run([program], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=env, timeout=120)
    return done.returncode, done.stderr


def errors(text, source):
    """[(kind, "function file:line" of the first frame in `source`)] and the
    direct leaks [(bytes, objects)]."""
    out, leaks = [], []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = ERROR.match(line)
        if m and m.group(1) == "AddressSanitizer":
            frame = "(no frame in %s)" % source
            for next_line in lines[i + 1:i + 40]:
                f = FRAME.match(next_line)
                if f and f.group(2).endswith(source):
                    frame = "%s %s:%s" % (f.group(1), os.path.basename(f.group(2)), f.group(3))
                    break
            out.append((m.group(2), frame))
        l = LEAK.match(line)
        if l:
            leaks.append((int(l.group(1)), int(l.group(2))))
    return out, leaks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--own", required=True)
    ap.add_argument("--roost", required=True)
    ap.add_argument("--plain")
    ap.add_argument("--source", default="probe.c")
    args = ap.parse_args()

    rc_own, own_text = run(args.own)
    rc_roost, roost_text = run(args.roost)
    own, own_leaks = errors(own_text, args.source)
    roost, roost_leaks = errors(roost_text, args.source)
    failures = []
    kinds = [k for k, _ in own]
    if kinds != ["heap-use-after-free", "heap-buffer-overflow"]:
        failures.append("ASan's own malloc reports %s, not a use after free and an overflow" % kinds)
    if [f for _, f in own][:1] and not own[0][1].startswith("use_after_free "):
        failures.append("the use after free is not reported in use_after_free")
    if (128, 1) not in own_leaks:
        failures.append("LeakSanitizer does not report the 128-byte leak on ASan's own malloc")
    if rc_roost < 0:
        failures.append("the roost run died of signal %d" % -rc_roost)
    if [f for _, f in roost] != [f for _, f in own]:
        failures.append("the errors are not reported at the same lines")
    if any(k != "use-after-poison" for k, _ in roost):
        failures.append("roost's run reports other than use-after-poison")
    plain_text = ""
    if args.plain:
        rc_plain, plain_text = run(args.plain, {"ROOST_STATS": "1"})
        figures = dict(re.findall(r"^roost: (allocations|large_allocations) +(\d+)", plain_text,
                                  re.M))
        if rc_plain != 0:
            failures.append("the probe without ASan exited with %d" % rc_plain)
        elif "allocations" not in figures or "large_allocations" not in figures:
            failures.append("the probe without ASan printed no report")
        elif int(figures["large_allocations"]) * 10 > int(figures["allocations"]):
            failures.append("without ASan, %s of %s allocations were large objects" %
                            (figures["large_allocations"], figures["allocations"]))
    if failures:
        print("FAILED: " + "; ".join(failures))
        print("--- ASan's own malloc: %s, leaks %s" % (own, own_leaks))
        print("--- roost: %s, leaks %s" % (roost, roost_leaks))
        print("--- ASan's own malloc's report:\n" + own_text)
        print("--- roost's report:\n" + roost_text)
        if plain_text:
            print("--- without ASan:\n" + plain_text)
        return 1
    print("ASan reports the same errors at the same lines:")
    for (k_own, frame), (k_roost, _) in zip(own, roost):
        print("  %s: %s (roost: %s)" % (frame, k_own, k_roost))
    print("LeakSanitizer: %s on ASan's own malloc, %s with roost (it sees only its own "
          "malloc's blocks)" % (own_leaks, roost_leaks or "nothing"))
    if args.plain:
        print("without ASan: small objects from slabs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
