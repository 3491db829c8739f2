"""Where roost stands against the best peer, case by case (the docs page's section "Against
the best peer", and the command bench/standing.py on a saved run's suite.json).

For every case: the peer (any allocator but roost and its variants) with the highest median
throughput, roost's time relative to it as a ratio of medians, the range of the per-repetition
(paired) ratios, with a 95 % interval when there are at least 6 repetitions (paired.py's
rule), and roost's peak RSS relative to the lowest of the peers'.  Each case is then checked
against roost's goals, and given a standing that two machine speeds cannot flip (speeds.py):
"ahead", "behind" or "level within noise", judged by the paired ratios' 95 % interval when
there is one and no allocator of the two ran at two speeds, else by the fast runs only.
The goals:

- time: no peer more than 5 % faster (ratio of medians <= 1.05).  A case over the line is
  "behind" when every repetition (or the interval) is over it too, else "behind in the
  median" (the repetitions disagree: noise can explain it);
- the message-passing workloads (msgpass, xmalloc, prodcons, symmetric: what roost is built
  for) must stay 15 % ahead: the best peer's time at least 1.15 x roost's;
- peak RSS: no higher than the lowest peer's on the producer-consumer workloads (msgpass,
  xmalloc, prodcons), at most 10 % above it elsewhere.
"""

import json
import statistics
import sys

from .allocators import ROOST, in_roost_family
from .paired import median_ci_rank
from .report import fmt_rate, summarize
from . import speeds
from .speeds import describe, two_speeds, verdict

MESSAGE_PASSING = ("msgpass", "xmalloc", "prodcons", "symmetric")
PRODUCER_CONSUMER = ("msgpass", "xmalloc", "prodcons")
PEER_AHEAD = 1.05   # roost's time / best peer's above this: the peer is ahead
LEAD = 1.15         # best peer's time / roost's at least this on message-passing workloads
RSS_LIMIT = 1.10    # roost's peak RSS / lowest peer's, elsewhere


def family(workload_key, families):
    """Is the workload one of `families` (the key itself, or the key's variants
    such as prodcons-64)?"""
    return any(workload_key == f or workload_key.startswith(f + "-") for f in families)


def fast_figure(figures):
    """An allocator's throughput in a case as two speeds cannot move it: the median of its
    fast runs when they ran at two speeds, else the median of all."""
    split = two_speeds([1 / f for f in figures if f > 0])
    return 1 / statistics.median(split["fast"]) if split else statistics.median(figures)


def case_standing(results, summary, case):
    """The standing of roost in one case (a dict), or None when roost or every peer lacks
    figures there."""
    mine = summary.get((case["id"], ROOST), {})
    peers = [s for s in (summary.get((case["id"], a["name"]), {}) for a in results["allocators"]
                         if not in_roost_family(a["name"]))
             if "figure_median" in s]
    if "figure_median" not in mine or not peers:
        return None
    # Every good run's figure, per allocator and repetition.
    figs = {}
    for r in results["runs"]:
        if r["case"] == case["id"] and r["ok"]:
            figs.setdefault(r["allocator"], {})[r["rep"]] = r["figure"]
    best = max(peers, key=lambda s: fast_figure(list(figs[s["allocator"]].values())))
    lowest_rss = min(peers, key=lambda s: s["rss_median_kib"])
    # Time is work / throughput, and every allocator does the same work in a case:
    # roost's time / the peer's = the peer's throughput / roost's.
    ratio = best["figure_median"] / mine["figure_median"]
    reps = sorted(set(figs.get(ROOST, {})) & set(figs.get(best["allocator"], {})))
    paired = sorted(figs[best["allocator"]][k] / figs[ROOST][k] for k in reps)
    # Times (1 / throughput: every allocator does the same work in a case) of every run.
    times = {a: [1 / f for f in figs.get(a, {}).values() if f > 0]
             for a in (ROOST, best["allocator"])}
    word, basis, estimate = verdict(times[ROOST], times[best["allocator"]], paired)
    field = next((r.get("figure_field", "") for r in results["runs"]
                  if r["case"] == case["id"] and r.get("figure_field")), "")
    speeds = [(a, describe(split, lambda t: fmt_rate(1 / t, field)))
              for a in (ROOST, best["allocator"]) for split in [two_speeds(times[a])] if split]
    k = median_ci_rank(len(paired))
    ci = (paired[k - 1], paired[-k]) if k else None
    # The bound that must clear the line for a consistent verdict: the interval's when
    # there is one, else every repetition's (with no repetition both ran, the median's).
    low = ci[0] if ci else paired[0] if paired else ratio
    if speeds and estimate is not None:
        # Two speeds: the medians say which speed most runs fell at; the goals are
        # checked on the fast runs instead (the estimate), and so is the bound.
        ratio = low = estimate
    wl = case["wl"]
    st = {"case": case, "best": best["allocator"], "ratio": ratio, "paired": paired, "ci": ci,
          "standing": word, "basis": basis, "two_speeds": speeds,
          "median_ratio": best["figure_median"] / mine["figure_median"],
          "rss_peer": lowest_rss["allocator"],
          "rss_ratio": mine["rss_median_kib"] / lowest_rss["rss_median_kib"],
          "message_passing": family(wl, MESSAGE_PASSING),
          "producer_consumer": family(wl, PRODUCER_CONSUMER)}
    if ratio > PEER_AHEAD:
        st["time"] = "behind" if low > PEER_AHEAD else "behind in the median"
    elif st["message_passing"] and 1 / ratio < LEAD:
        st["time"] = f"lead under {pct(LEAD)}"
    else:
        st["time"] = "ok"
    limit = 1.0 if st["producer_consumer"] else RSS_LIMIT
    st["rss_limit"] = limit
    st["rss"] = "ok" if st["rss_ratio"] <= limit else "over"
    return st


def standings(results, summary):
    out = []
    for c in results["cases"]:
        if c["wl"] in results["not_built"]:
            continue
        st = case_standing(results, summary, c)
        if st is not None:
            out.append(st)
    return out


def pct(factor):
    """1.15 -> "15 %"."""
    return f"{(factor - 1) * 100:.0f} %"


def fmt_range(st):
    if not st["paired"]:
        return "n/a"
    lo, hi = st["paired"][0], st["paired"][-1]
    text = f"{lo:.2f}–{hi:.2f}"
    if st["ci"] and st["ci"] != (lo, hi):  # up to 8 repetitions it is the range itself
        text += f" ({st['ci'][0]:.2f}–{st['ci'][1]:.2f})"
    return text


def section(results, summary):
    """The Markdown lines of the section (starting with its heading)."""
    sts = standings(results, summary)
    if not sts:
        return []
    n = len(sts)
    behind = [s for s in sts if s["time"] == "behind"]
    median_only = [s for s in sts if s["time"] == "behind in the median"]
    mp = [s for s in sts if s["message_passing"]]
    short_lead = [s for s in mp if s["time"] != "ok"]
    over = [s for s in sts if s["rss"] == "over"]
    reps = results["config"]["reps"]
    out = ["## Against the best peer", "",
           "For each case: the fastest peer (median throughput) and roost's time relative "
           "to it (ratio of medians; > 1: the peer is faster), the range of the ratios of "
           f"the {reps} paired repetitions (each repetition runs every allocator back to "
           "back; a 95 % interval for the median needs at least 6, is the range itself up "
           "to 8, and is shown in brackets from 9)" +
           ", and roost's peak RSS relative to the lowest of the peers'. roost's goals: no "
           f"peer more than {pct(PEER_AHEAD)} faster anywhere; on the message-passing "
           f"workloads ({', '.join(MESSAGE_PASSING)}) at least {pct(LEAD)} ahead of the "
           "best peer; peak RSS no higher than the lowest peer's on the producer-consumer "
           f"workloads ({', '.join(PRODUCER_CONSUMER)}) and at most {pct(RSS_LIMIT)} "
           "above it elsewhere. A case is *behind* when every repetition (or the interval) "
           "is past the line, *behind in the median* when only the median is. Where roost or "
           "the peer ran at two speeds (runs in a fast and a slow cluster: the machine's, not "
           "the allocator's), the ratio and the lines are taken from the fast runs only. "
           "*Standing*: *ahead*, *behind* or *level within noise*, judged by the paired "
           "ratios' 95 % interval where there is one and nothing ran at two speeds, else by "
           "the fastest runs and the fast runs' medians, both past the spread of the runs at "
           "each speed (*too few runs* under 3 of each).", "",
           f"Of {n} cases: a peer is ahead in {len(behind)} (and in the median only in "
           f"{len(median_only)} more); roost leads by {pct(LEAD)} or more in "
           f"{len(mp) - len(short_lead)} of the {len(mp)} message-passing cases; its peak "
           f"RSS is within the limit in {n - len(over)}.", "",
           "| case | fastest peer | roost's time / its | paired range | time | standing "
           "| lowest-RSS peer | roost's RSS / its | RSS |",
           "|---|---|---:|---:|---|---|---|---:|---|"]
    for s in sts:
        mark = " ²" if s["two_speeds"] else ""
        out.append(f"| {s['case']['short']} | {s['best']} | {s['ratio']:.2f}{mark} "
                   f"| {fmt_range(s)} | {s['time']} | {s['standing']} | {s['rss_peer']} "
                   f"| {s['rss_ratio']:.2f} (limit {s['rss_limit']:.2f}) | {s['rss']} |")
    two = [s for s in sts if s["two_speeds"]]
    if two:
        out += ["", "² Runs at two speeds (judged by the fast runs; the medians of all "
                "runs alone would have said what is in brackets):", ""]
        for s in two:
            runs = "; ".join(f"{a}: {d}" for a, d in s["two_speeds"])
            out.append(f"- {s['case']['short']}: {runs}. Fast runs: {s['ratio']:.2f}, "
                       f"{s['standing']} ({s['basis']}); medians of all: "
                       f"{s['median_ratio']:.2f} ({median_word(s['median_ratio'])}).")
    return out


def median_word(ratio):
    """What a ratio of medians alone says against the goals' line."""
    return "behind" if ratio > PEER_AHEAD else "ahead" if ratio < 1 else "level"


def self_test():
    """Verdicts on a made-up run of six cases and three allocators (speeds.py's own checks too)."""
    def run(case, alloc, rep, fig, rss):
        return {"case": case, "allocator": alloc, "rep": rep, "ok": True, "figure": fig,
                "maxrss_kib": rss}
    cases = [{"id": "prodcons", "wl": "prodcons", "short": "prodcons"},
             {"id": "larson", "wl": "larson", "short": "larson"},
             {"id": "frag", "wl": "frag", "short": "frag"},
             {"id": "large", "wl": "large", "short": "large"},
             {"id": "xmalloc@2", "wl": "xmalloc", "short": "xmalloc (2P/2C)"},
             {"id": "cache", "wl": "cache", "short": "cache"}]
    runs = []
    for rep in range(1, 6):
        # prodcons: roost 1.2 x the best peer's throughput (lead 20 %), RSS above tc's.
        runs += [run("prodcons", "roost", rep, 120.0, 110), run("prodcons", "tc", rep, 100.0, 100),
                 run("prodcons", "roost-old", rep, 500.0, 1)]
        # larson: tc 10 % faster in every repetition.
        runs += [run("larson", "roost", rep, 100.0, 100), run("larson", "tc", rep, 110.0, 105)]
        # frag: tc faster in the median, slower in one repetition; RSS 1.08 x (allowed).
        runs += [run("frag", "roost", rep, 100.0, 108),
                 run("frag", "tc", rep, 90.0 if rep == 1 else 110.0, 100)]
        # xmalloc: roost 10 % ahead, short of the 15 % a message-passing workload needs;
        # RSS equal to the lowest peer's (allowed on a producer-consumer workload).
        runs += [run("xmalloc@2", "roost", rep, 110.0, 100),
                 run("xmalloc@2", "tc", rep, 100.0, 100)]
        # cache: the machine's two speeds; roost's runs 3 times of 5 at the slow one (its
        # median there: 1.8 times behind), tc's once; at the fast speed they are level.
        runs += [run("cache", "roost", rep, 100.0 if rep in (1, 4) else 55.0, 100),
                 run("cache", "tc", rep, 101.0 if rep != 3 else 56.0, 100)]
    # large: roost and tc succeeded in different repetitions only (no pair): the
    # median decides, and the range is n/a.
    runs += [run("large", "roost", 1, 100.0, 100), run("large", "tc", 2, 200.0, 100)]
    results = {"cases": cases, "not_built": [], "runs": runs, "config": {"reps": 5},
               "allocators": [{"name": "roost"}, {"name": "tc"}, {"name": "roost-old"}]}
    summary = {}
    for c in cases:
        for a in ("roost", "tc", "roost-old"):
            rs = [r for r in runs if r["case"] == c["id"] and r["allocator"] == a]
            if rs:
                summary[(c["id"], a)] = {
                    "allocator": a, "figure_median": statistics.median(r["figure"] for r in rs),
                    "rss_median_kib": statistics.median(r["maxrss_kib"] for r in rs)}
    got = {s["case"]["id"]: (s["best"], round(s["ratio"], 3), s["time"], s["standing"], s["rss"])
           for s in standings(results, summary)}
    want = {"prodcons": ("tc", 0.833, "ok", "ahead", "over"),
            "larson": ("tc", 1.1, "behind", "behind", "ok"),
            "frag": ("tc", 1.1, "behind in the median", "level within noise", "ok"),
            "large": ("tc", 2.0, "behind", "too few runs", "ok"),
            "xmalloc@2": ("tc", 0.909, "lead under 15 %", "ahead", "ok"),
            "cache": ("tc", 1.01, "ok", "level within noise", "ok")}
    lines = section(results, summary)
    ok = (got == want and any("Of 6 cases: a peer is ahead in 2" in line for line in lines)
          and any(line.startswith("| large | tc | 2.00 | n/a |") for line in lines)
          and any(line.startswith("| cache | tc | 1.01 ² |") for line in lines)
          and any(line.startswith("- cache: roost: 2 runs near 100.0, 3 runs near 55.00;")
                  and "medians of all: 1.84 (behind)" in line for line in lines))
    failed = speeds.self_test()
    ok = ok and not failed
    print("standing self-test:", "ok" if ok else f"FAILED: {got} {failed}\n" + "\n".join(lines))
    return 0 if ok else 1


def main(argv):
    """bench/standing.py SUITE_JSON: prints the section for a saved run (bench/suite.py
    writes suite.json into its --out-dir, build/bench by default); --self-test checks the
    verdicts on a made-up run.  Exits 2 on bad arguments."""
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) == 2 and argv[1] in ("--help", "-h"):
        print(main.__doc__.strip())
        return 0
    if len(argv) != 2 or argv[1].startswith("-"):
        print(main.__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        results = json.load(f)
    print("\n".join(section(results, summarize(results))))
    return 0
