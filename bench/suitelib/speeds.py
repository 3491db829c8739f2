"""Runs at two speeds, and a verdict that two speeds cannot flip.

Some machines (this project's among them) run the same CPU-bound program at two speeds
from one run to the next: the runs of a case fall into a fast and a slow cluster, the slow
one about twice the fast one's time, under every allocator alike.  A median of a few runs
then says which cluster most of them fell into, not which allocator is faster.  Here:

- two_speeds(times): whether a case's run times cluster at two speeds, and which runs are
  the fast ones (two at least: one run apart from the rest, faster, is a lucky run, not a
  speed, as when a producer and its consumer happened to share a core);
- verdict(...): roost against a peer as "ahead", "behind" or "level within noise", judged by
  what two speeds cannot move: the paired ratios' 95 % interval when neither allocator ran at
  two speeds and there are enough repetitions for one; else the fast runs only (the ratio of
  the fastest runs and the ratio of the fast clusters' medians, both past the noise margin).

Owns: the rule that calls runs bimodal and the verdict built on it.  Must never: hide a run
(every run stays in the tables; this only decides what a verdict is judged by).
"""

import math
import statistics

from .paired import median_ci_rank

# Two speeds are called when the run times, sorted, have a gap of at least this factor
# between consecutive runs, and the gap is at least SPREAD_FACTOR times the wider
# cluster's own spread (all in log time).
GAP = 1.25
SPREAD_FACTOR = 3.0
# The fewest runs a fast cluster has: a verdict by the fast runs compares speeds both
# allocators can be seen to run at, and one run is not seen to be one.
MIN_FAST = 2
# The smallest difference a verdict from the fast runs calls real: the widest spread (max /
# min) of any cluster either allocator ran in, slow ones included (a speed's scatter is the
# machine's, and two fast runs show little of it), but never under this.
MIN_MARGIN = 1.02
# Fewer runs than this of either allocator show nothing of their scatter: no verdict.
MIN_RUNS = 3


def two_speeds(times):
    """For positive run times (any order): None when they do not cluster at two speeds, else
    {"fast": [...], "slow": [...], "gap": factor between the clusters' nearest runs}.
    Needs three runs at least (two are one gap, nothing to compare it with), MIN_FAST of them
    in the fast cluster (a slow cluster of one run is one slow run: the fast runs are still
    the speed to judge by)."""
    ts = sorted(times)
    if len(ts) < 3 or ts[0] <= 0:
        return None
    logs = [math.log(t) for t in ts]
    gaps = [logs[i + 1] - logs[i] for i in range(len(logs) - 1)]
    at = max(range(len(gaps)), key=lambda i: gaps[i])
    gap = gaps[at]
    fast, slow = logs[:at + 1], logs[at + 1:]
    if len(fast) < MIN_FAST:
        return None
    spread = max(fast[-1] - fast[0], slow[-1] - slow[0])
    if gap < math.log(GAP) or gap < SPREAD_FACTOR * spread:
        return None
    return {"fast": ts[:at + 1], "slow": ts[at + 1:], "gap": math.exp(gap)}


def describe(split, show=lambda t: f"{t:.3g} s"):
    """'2 runs near 1.09 s, 1 run near 2.01 s' for a split of run times; `show` writes one
    time (the medians of the two clusters)."""
    def part(xs):
        return f"{len(xs)} run{'s' if len(xs) > 1 else ''} near {show(statistics.median(xs))}"
    return f"{part(split['fast'])}, {part(split['slow'])}"


def verdict(mine, theirs, paired):
    """roost's standing against one peer in one case.

    mine, theirs: run times (seconds, or any figure where lower is better) of roost and the
    peer; paired: roost's time / the peer's in each repetition both ran (> 1: the peer is
    faster there).  When only one of the two ran at two speeds, the other's runs are all
    taken as they are: they may all have fallen at one speed, which nothing here can tell.
    Returns (word, basis, estimate): word "ahead", "behind", "level within noise" or "too
    few runs"; basis, what it was judged by; estimate, roost's time / the peer's by that
    basis (None when nothing could be judged)."""
    if len(mine) < MIN_RUNS or len(theirs) < MIN_RUNS:
        return ("too few runs", f"{len(mine)} and {len(theirs)} runs: {MIN_RUNS} of each at "
                "least show how much they scatter", None)
    split_mine, split_theirs = two_speeds(mine), two_speeds(theirs)
    k = median_ci_rank(len(paired))
    if split_mine is None and split_theirs is None and k:
        ordered = sorted(paired)
        lo, hi = ordered[k - 1], ordered[-k]
        estimate = statistics.median(paired)
        basis = f"95 % interval of {len(paired)} paired ratios, {lo:.2f}–{hi:.2f}"
        if lo > 1:
            return "behind", basis, estimate
        if hi < 1:
            return "ahead", basis, estimate
        return "level within noise", basis, estimate
    fast_mine = split_mine["fast"] if split_mine else sorted(mine)
    fast_theirs = split_theirs["fast"] if split_theirs else sorted(theirs)
    by_min = min(fast_mine) / min(fast_theirs)
    by_median = statistics.median(fast_mine) / statistics.median(fast_theirs)
    clusters = [fast_mine, fast_theirs] + [s["slow"] for s in (split_mine, split_theirs) if s]
    margin = max([MIN_MARGIN] + [max(c) / min(c) for c in clusters])
    who = [name for name, s in (("roost", split_mine), ("the peer", split_theirs)) if s]
    basis = (f"fast runs only ({' and '.join(who)} ran at two speeds)" if who else
             f"fastest runs and medians ({len(paired)} repetitions: too few for an interval)")
    basis += (f": {by_min:.2f} by the fastest, {by_median:.2f} by the medians, "
              f"noise ±{(margin - 1) * 100:.0f} %")
    if by_min > margin and by_median > margin:
        return "behind", basis, by_median
    if by_min < 1 / margin and by_median < 1 / margin:
        return "ahead", basis, by_median
    return "level within noise", basis, by_median


def self_test():
    """The rule on made-up times; returns a list of what failed (empty: ok)."""
    failed = []

    def check(what, got, want):
        if got != want:
            failed.append(f"{what}: got {got!r}, want {want!r}")

    # The machine's two speeds: 1.09 s and about 2 s.
    split = two_speeds([2.01, 1.09, 1.98, 1.10])
    check("two speeds", split and (split["fast"], split["slow"]), ([1.09, 1.10], [1.98, 2.01]))
    check("one speed", two_speeds([1.00, 1.03, 1.01, 1.05, 0.99]), None)
    # A wide spread without a clear gap is noise, not two speeds.
    check("spread", two_speeds([1.0, 1.15, 1.3, 1.45, 1.6]), None)
    check("too few", two_speeds([1.0, 2.0]), None)
    check("one slow run", two_speeds([1.0, 1.01, 2.0]) is not None, True)
    # One fast run: a lucky run, not a speed.
    check("one fast run", two_speeds([1.0, 2.0, 2.02, 1.98, 2.01]), None)
    # The peer's one lucky run (a producer and consumer that shared a core) against roost's
    # five at the usual speed, roost's median the lower: not judged by that one run.
    mine, theirs = [1.30, 1.31, 1.33, 1.30, 1.32], [0.15, 1.45, 1.40, 1.42, 1.44]
    paired = [m / t for m, t in zip(mine, theirs)]
    check("lucky run", verdict(mine, theirs, paired)[0], "level within noise")
    # roost's median on the slow side (three slow runs of five), the peer's on the fast
    # side: the median says 1.8 times behind; the fast runs say level.
    mine, theirs = [1.09, 1.98, 2.0, 1.10, 2.02], [1.10, 1.08, 1.99, 1.09, 2.01]
    paired = [m / t for m, t in zip(mine, theirs)]
    check("median", round(statistics.median(mine) / statistics.median(theirs), 2), 1.8)
    check("bimodal level", verdict(mine, theirs, paired)[0], "level within noise")
    # The same, roost's fast runs 20 % faster than the peer's: ahead.
    mine = [0.88, 1.60, 1.62, 0.89, 1.61]
    paired = [m / t for m, t in zip(mine, theirs)]
    check("bimodal ahead", verdict(mine, theirs, paired)[0], "ahead")
    # Both at two speeds, two fast runs each, 3 % apart, and 8 % of scatter in the slow runs
    # (sqlite-shell in a 7-repetition run): the two fast runs' 2 % is not the noise.
    mine = [1.000, 1.010, 1.30, 1.34, 1.36, 1.38, 1.40]
    theirs = [0.970, 0.975, 1.40, 1.45, 1.48, 1.50, 1.52]
    paired = [m / t for m, t in zip(mine, theirs)]
    check("two fast runs, slow scatter", verdict(mine, theirs, paired)[0],
          "level within noise")
    check("two fast runs, slow scatter, 15 % apart",
          verdict([1.115, 1.121, 1.50, 1.55, 1.57, 1.59, 1.62], theirs, paired)[0], "behind")
    # One speed, 9 repetitions: the interval decides.
    mine = [1.00 + 0.01 * i for i in range(9)]
    theirs = [0.90 + 0.01 * i for i in range(9)]
    paired = [m / t for m, t in zip(mine, theirs)]
    check("interval behind", verdict(mine, theirs, paired)[0], "behind")
    theirs = [1.00 + 0.01 * ((i * 5) % 9) for i in range(9)]
    paired = [m / t for m, t in zip(mine, theirs)]
    check("interval level", verdict(mine, theirs, paired)[0], "level within noise")
    # Three repetitions, one speed: the fastest and the medians, past the spread.
    check("few behind", verdict([1.30, 1.31, 1.32], [1.00, 1.01, 1.02], [1.3, 1.3, 1.3])[0],
          "behind")
    check("few level", verdict([1.00, 1.01, 1.02], [1.00, 1.005, 1.03], [1.0, 1.0, 1.0])[0],
          "level within noise")
    check("one run", verdict([1.0], [2.0], [0.5])[0], "too few runs")
    return failed
