"""Two allocators of one suite run, compared case by case (command: bench/paired.py).

    python3 bench/paired.py build/bench/batchit/suite-runs.csv roost roost-nobatchit

For every case of the run's suite-runs.csv (bench/suite.py) that both
allocators ran: the time ratio B / A as a ratio of medians and as the median
of the per-repetition ratios (the suite runs A and B back to back in every
repetition, so a paired ratio cancels a change of machine speed between
repetitions), with its min-max and a 95 % confidence interval; and the peak
RSS ratio B / A of medians.  Prints a Markdown table; exits 2 on bad
arguments.  --self-test checks the arithmetic on a made-up run.

The interval is distribution-free (the binomial order statistics of the
median: no assumption about how run times scatter): with n repetitions it
runs from the k-th smallest paired ratio to the k-th largest, for the
largest k that still covers the median with probability >= 95 %.  It needs
at least 6 repetitions (n/a below).  Read it as: a case is shown slower
(or faster) by more than x only if the whole interval lies beyond x.
"""
import csv
import math
import statistics
import sys


def median_ci_rank(n, level=0.95):
    """The k (1-based) for which [k-th smallest, k-th largest] of n samples
    covers their population's median with probability >= level; 0 if none."""
    k = 0
    # P(Binomial(n, 1/2) <= j - 1): the chance that fewer than j samples
    # fall below the median (and, as often, above it).
    tail = 0.0
    for j in range(1, n // 2 + 1):
        tail += math.comb(n, j - 1) / 2 ** n
        if 1 - 2 * tail < level:
            break
        k = j
    return k


def compare(rows, a, b):
    """(case, time ratio of medians, median paired ratio, min, max, CI low,
    CI high, RSS ratio) for every case both allocators ran, in the rows'
    order; the CI bounds are None with fewer than 6 repetitions."""
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
        k = median_ci_rank(len(paired))
        ordered = sorted(paired)
        ci = (ordered[k - 1], ordered[-k]) if k else (None, None)
        out.append((case, of_medians, statistics.median(paired), min(paired), max(paired), *ci,
                    rss_ratio))
    return out


def self_test():
    """Known ratios from a made-up run: a failed repetition and a case only
    one allocator ran are left out; the interval's ranks match the binomial
    table (n = 6: the extremes, 96.9 %; n = 9: the 2nd, 96.1 %; n = 15:
    the 4th, 96.5 %; n = 5: none)."""
    def row(case, alloc, rep, secs, rss, ok="True"):
        return {"case": case, "allocator": alloc, "rep": str(rep), "seconds": str(secs),
                "maxrss_kib": str(rss), "ok": ok}
    rows = [row("x", "A", 1, 1.0, 100), row("x", "B", 1, 1.5, 110),
            row("x", "A", 2, 2.0, 100), row("x", "B", 2, 2.0, 130),
            row("x", "A", 3, 1.0, 100), row("x", "B", 3, 9.0, 999, ok="False"),
            row("y", "A", 1, 1.0, 100)]
    got = compare(rows, "A", "B")
    want = [("x", 1.75 / 1.5, 1.25, 1.0, 1.5, None, None, 1.2)]
    ok = len(got) == 1 and got[0][0] == "x" and all(
        g == w if w is None else abs(g - w) < 1e-9 for g, w in zip(got[0][1:], want[0][1:]))
    # Nine repetitions with paired ratios 1.1, 1.2, ..., 1.9 (shuffled): the
    # interval runs from the 2nd smallest to the 2nd largest.
    nine = []
    for rep, r in enumerate([1.5, 1.1, 1.9, 1.3, 1.7, 1.2, 1.8, 1.4, 1.6], 1):
        nine += [row("z", "A", rep, 1.0, 100), row("z", "B", rep, r, 100)]
    z = compare(nine, "A", "B")[0]
    ok = ok and abs(z[2] - 1.5) < 1e-9 and abs(z[5] - 1.2) < 1e-9 and abs(z[6] - 1.8) < 1e-9
    ranks = {n: median_ci_rank(n) for n in (5, 6, 9, 15)}
    ok = ok and ranks == {5: 0, 6: 1, 9: 2, 15: 4}
    print("paired self-test:", "ok" if ok else f"FAILED: {got}, {z}, {ranks}")
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
    print(f"| case | time {b} / {a}: of medians | median of paired ratios | 95 % CI "
          f"| min-max | peak RSS {b} / {a} |")
    print("|---|---:|---:|---:|---:|---:|")
    for case, of_medians, med, lo, hi, ci_lo, ci_hi, rss in compare(rows, a, b):
        ci = "n/a" if ci_lo is None else f"{ci_lo:.3f}-{ci_hi:.3f}"
        print(f"| {case} | {of_medians:.3f} | {med:.3f} | {ci} | {lo:.2f}-{hi:.2f} | {rss:.3f} |")
    return 0
