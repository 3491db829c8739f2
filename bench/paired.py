#!/usr/bin/env python3
"""bench/paired.py: two allocators of one suite run, compared case by case.

    python3 bench/paired.py build/bench/batchit/suite-runs.csv roost roost-nobatchit

For every case of the run's suite-runs.csv (bench/suite.py) that both
allocators ran: the time ratio B / A as a ratio of medians and as the median
of the per-repetition ratios (the suite runs A and B back to back in every
repetition, so a paired ratio cancels a change of machine speed between
repetitions), with its min-max; and the peak RSS ratio B / A of medians.
Prints a Markdown table; exits 2 on bad arguments.  --self-test checks the
arithmetic on a made-up run.
"""
import csv
import statistics
import sys


def compare(rows, a, b):
    """(case, time ratio of medians, median paired ratio, min, max, RSS ratio)
    for every case both allocators ran, in the rows' order."""
    rows = [r for r in rows if r["ok"] == "True"]
    out = []
    for case in dict.fromkeys(r["case"] for r in rows):
        secs, rss = {}, {}
        for r in rows:
            if r["case"] == case and r["allocator"] in (a, b):
                secs.setdefault(r["allocator"], {})[r["rep"]] = float(r["seconds"])
                rss.setdefault(r["allocator"], {})[r["rep"]] = int(r["maxrss_kib"])
        reps = sorted(set(secs.get(a, {})) & set(secs.get(b, {})), key=int)
        if not reps:
            continue
        paired = [secs[b][k] / secs[a][k] for k in reps]
        of_medians = (statistics.median(secs[b][k] for k in reps) /
                      statistics.median(secs[a][k] for k in reps))
        rss_ratio = (statistics.median(rss[b][k] for k in reps) /
                     statistics.median(rss[a][k] for k in reps))
        out.append((case, of_medians, statistics.median(paired), min(paired), max(paired),
                    rss_ratio))
    return out


def self_test():
    """Known ratios from a made-up run: a failed repetition and a case only
    one allocator ran are left out."""
    def row(case, alloc, rep, secs, rss, ok="True"):
        return {"case": case, "allocator": alloc, "rep": str(rep), "seconds": str(secs),
                "maxrss_kib": str(rss), "ok": ok}
    rows = [row("x", "A", 1, 1.0, 100), row("x", "B", 1, 1.5, 110),
            row("x", "A", 2, 2.0, 100), row("x", "B", 2, 2.0, 130),
            row("x", "A", 3, 1.0, 100), row("x", "B", 3, 9.0, 999, ok="False"),
            row("y", "A", 1, 1.0, 100)]
    got = compare(rows, "A", "B")
    want = [("x", 1.75 / 1.5, 1.25, 1.0, 1.5, 1.2)]
    ok = len(got) == 1 and got[0][0] == "x" and all(
        abs(g - w) < 1e-9 for g, w in zip(got[0][1:], want[0][1:]))
    print("paired self-test:", "ok" if ok else f"FAILED: {got} != {want}")
    return 0 if ok else 1


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    path, a, b = argv[1:]
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    print(f"| case | time {b} / {a}: of medians | median of paired ratios (min-max) "
          f"| peak RSS {b} / {a} |")
    print("|---|---:|---:|---:|")
    for case, of_medians, med, lo, hi, rss in compare(rows, a, b):
        print(f"| {case} | {of_medians:.3f} | {med:.3f} ({lo:.2f}-{hi:.2f}) | {rss:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
