#!/usr/bin/env python3
"""The benchmark plots' colours and direction (bench/suitelib/plots.py), without matplotlib.

  tests/plot_palette_check.py

Checks:
  - every pair of plots.PALETTE's colours stays apart, by at least THRESHOLD CIEDE2000
    units, for normal vision and under simulated protanopia, deuteranopia and tritanopia
    (Machado, Oliveira and Fernandes 2009, "A Physiologically-based Model for Simulation of
    Color Vision Deficiency", IEEE TVCG 15(6), their matrices at severity 1.0, applied to
    linear sRGB; CIEDE2000 as in Sharma, Wu and Dalal 2005, "The CIEDE2000 Color-Difference
    Formula: Implementation Notes, Supplementary Test Data, and Mathematical Observations",
    on CIELAB under D65);
  - the measure can fail: matplotlib's default colour cycle, which the plots used before,
    falls below the threshold (orange and green under protanopia, 1.3 units);
  - every allocator gets a look of its own (colour, marker, line style, hatch), the first
    len(PALETTE) each a different colour and every one a second cue besides colour, and
    roost's colour (the first) no other allocator's;
  - the plot code uses them: plots.plot_all, run on a made-up suite result against a stand-in
    for matplotlib that records each call, draws every series and bar in its allocator's
    style; and the relative plot shows throughput relative to roost's, higher is better
    (an allocator twice roost's throughput at 2, one half as fast at 0.5), as the tables do.
With matplotlib importable, plot_all also draws the real plots once, into a temporary folder.
Exits 1 with every failure listed.
"""

import itertools
import math
import os
import sys
import tempfile
import types

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from suitelib import plots  # noqa: E402  (bench/ on the path, as bench/suite.py has it)

# Two colours closer than this (CIEDE2000) are taken for one by some readers. One unit is
# about the smallest difference seen side by side; lines and bars in a legend need many
# more: 10 is the common floor for colours that must be told apart at a glance.
THRESHOLD = 10.0

# Machado et al. 2009, severity 1.0 (dichromacy): linear RGB in, linear RGB out.
SIMULATIONS = {
    "normal vision": ((1, 0, 0), (0, 1, 0), (0, 0, 1)),
    "protanopia": ((0.152286, 1.052583, -0.204868),
                   (0.114503, 0.786281, 0.099216),
                   (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968),
                     (0.280085, 0.672501, 0.047413),
                     (-0.011820, 0.042940, 0.968881)),
    "tritanopia": ((1.255528, -0.076749, -0.178779),
                   (-0.078411, 0.930809, 0.147602),
                   (0.004733, 0.691367, 0.303900)),
}

# matplotlib's default colour cycle ("tab10"), the plots' colours before PALETTE.
MATPLOTLIB_DEFAULT = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                      "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")

failures = []


def check(ok, what, detail=""):
    if not ok:
        failures.append(what + (": " + detail if detail else ""))


def linear_rgb(hex_colour):
    """sRGB '#rrggbb' to linear RGB in [0, 1] (the sRGB transfer function undone)."""
    out = []
    for i in (1, 3, 5):
        c = int(hex_colour[i:i + 2], 16) / 255
        out.append(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
    return out


def simulate(rgb, matrix):
    """Linear RGB as a reader with the deficiency `matrix` models sees it, kept in gamut."""
    return [min(1.0, max(0.0, sum(m * c for m, c in zip(row, rgb)))) for row in matrix]


def lab(rgb):
    """Linear sRGB to CIELAB (D65 white)."""
    x = 0.4124564 * rgb[0] + 0.3575761 * rgb[1] + 0.1804375 * rgb[2]
    y = 0.2126729 * rgb[0] + 0.7151522 * rgb[1] + 0.0721750 * rgb[2]
    z = 0.0193339 * rgb[0] + 0.1191920 * rgb[1] + 0.9503041 * rgb[2]

    def f(t):
        return t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29

    fx, fy, fz = f(x / 0.95047), f(y / 1.0), f(z / 1.08883)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def ciede2000(lab1, lab2):
    """The CIEDE2000 difference of two CIELAB colours (kL = kC = kH = 1)."""
    l1, a1, b1 = lab1
    l2, a2, b2 = lab2
    c_mean = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_mean ** 7 / (c_mean ** 7 + 25 ** 7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1p = math.degrees(math.atan2(b1, a1p)) % 360 if c1p else 0.0
    h2p = math.degrees(math.atan2(b2, a2p)) % 360 if c2p else 0.0
    dl, dc = l2 - l1, c2p - c1p
    dh = 0.0
    if c1p * c2p:
        dh = h2p - h1p
        if dh > 180:
            dh -= 360
        elif dh < -180:
            dh += 360
    dH = 2 * math.sqrt(c1p * c2p) * math.sin(math.radians(dh / 2))
    l_mean, cp_mean = (l1 + l2) / 2, (c1p + c2p) / 2
    if c1p * c2p == 0:
        h_mean = h1p + h2p
    elif abs(h1p - h2p) <= 180:
        h_mean = (h1p + h2p) / 2
    else:
        h_mean = (h1p + h2p + (360 if h1p + h2p < 360 else -360)) / 2
    t = (1 - 0.17 * math.cos(math.radians(h_mean - 30)) + 0.24 * math.cos(math.radians(2 * h_mean))
         + 0.32 * math.cos(math.radians(3 * h_mean + 6))
         - 0.20 * math.cos(math.radians(4 * h_mean - 63)))
    d_theta = 30 * math.exp(-((h_mean - 275) / 25) ** 2)
    r_c = 2 * math.sqrt(cp_mean ** 7 / (cp_mean ** 7 + 25 ** 7))
    s_l = 1 + 0.015 * (l_mean - 50) ** 2 / math.sqrt(20 + (l_mean - 50) ** 2)
    s_c = 1 + 0.045 * cp_mean
    s_h = 1 + 0.015 * cp_mean * t
    r_t = -math.sin(math.radians(2 * d_theta)) * r_c
    return math.sqrt((dl / s_l) ** 2 + (dc / s_c) ** 2 + (dH / s_h) ** 2
                     + r_t * (dc / s_c) * (dH / s_h))


def closest_pair(palette, matrix):
    """(difference, colour, colour) of the palette's two closest colours under `matrix`."""
    return min((ciede2000(lab(simulate(linear_rgb(x), matrix)),
                          lab(simulate(linear_rgb(y), matrix))), x, y)
               for x, y in itertools.combinations(palette, 2))


def check_measure():
    # Sharma, Wu and Dalal's test data: pairs 1, 7, 17 and 25 of their table.
    for lab1, lab2, want in (((50, 2.6772, -79.7751), (50, 0, -82.7485), 2.0425),
                             ((50, 0, 0), (50, -1, 2), 2.3669),
                             ((50, 2.5, 0), (73, 25, -18), 27.1492),
                             ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644)):
        got = ciede2000(lab1, lab2)
        check(abs(got - want) < 1e-4, f"CIEDE2000 of {lab1} and {lab2}", f"{got:.4f}, not {want}")
    # White is white in every simulation (each matrix's rows sum to 1).
    for name, m in SIMULATIONS.items():
        check(all(abs(c - 1) < 1e-3 for c in simulate([1, 1, 1], m)), f"{name}: white stays white")
    d, x, y = closest_pair(MATPLOTLIB_DEFAULT, SIMULATIONS["protanopia"])
    check(d < THRESHOLD, "matplotlib's default colours fail under protanopia",
          f"closest {x} {y}: {d:.1f}")


def check_palette():
    palette = plots.PALETTE
    check(len(set(c.lower() for c in palette)) == len(palette) >= 8,
          "PALETTE: at least 8 distinct colours", repr(palette))
    for name, m in SIMULATIONS.items():
        d, x, y = closest_pair(palette, m)
        print(f"{name:14} closest pair {x} {y}: {d:.1f} CIEDE2000 (threshold {THRESHOLD})")
        check(d >= THRESHOLD, f"PALETTE under {name}", f"{x} and {y} only {d:.1f} apart")


def check_styles():
    n = 24  # more allocators than any run has: every peer, variant and extra library
    looks = [plots.style(i) for i in range(n)]
    combos = {(s["color"], s["marker"], s["linestyle"], s["hatch"]) for s in looks}
    check(len(combos) == n, "every allocator's look is its own", repr(looks))
    first = looks[:len(plots.PALETTE)]
    check(sorted(s["color"] for s in first) == sorted(plots.PALETTE),
          "the first allocators each take a different colour of PALETTE")
    check(all(s["color"] in plots.PALETTE for s in looks), "every colour from PALETTE")
    check(all(s["color"] != looks[0]["color"] for s in looks[1:]),
          "roost's colour (the first) is no other allocator's")
    for i, j in itertools.combinations(range(n), 2):
        a, b = looks[i], looks[j]
        if a["color"] == b["color"]:
            check((a["marker"], a["linestyle"]) != (b["marker"], b["linestyle"])
                  and a["hatch"] != b["hatch"], f"allocators {i} and {j}: one colour, told "
                  "apart by marker, line style and hatch")
    check(len({s["marker"] for s in first}) == len(first) and
          len({s["hatch"] for s in first}) == len(first),
          "a marker and a hatch of its own for each of the first allocators (a second cue)")


class Recorder:
    """A stand-in for a matplotlib object: every method call is recorded, and returns None
    (or, for subplots, a figure and an axes)."""

    def __init__(self, log, name):
        self._log, self._name = log, name

    def __getattr__(self, method):
        def call(*args, **kwargs):
            self._log.append((self._name, method, args, kwargs))
            if method == "subplots":
                return Recorder(self._log, "fig"), Recorder(self._log, "ax")
            if method == "savefig":
                with open(args[0], "wb"):  # the file the plot would be
                    pass
            return None
        return call


ALLOCATORS = ["roost", "glibc", "twice"] + [f"peer{k}" for k in range(8)]
# Each allocator's throughput as a multiple of roost's.
SPEED = {"roost": 1.0, "glibc": 0.5, "twice": 2.0, **{f"peer{k}": 0.75 + 0.1 * k
                                                      for k in range(8)}}


def made_up_results():
    """A suite result (the shape of suite.json) of two workloads, one swept over threads."""
    cases = [{"id": f"sweep-t{t}", "wl": "sweep", "threads": t, "base": t == 1,
              "short": f"sweep {t}", "label": f"sweep, {t} threads"} for t in (1, 2, 4)]
    cases.append({"id": "single", "wl": "single", "threads": 0, "base": True,
                  "short": "single", "label": "single"})
    runs = [{"case": c["id"], "allocator": n, "rep": 1, "ok": True,
             "figure": 1e6 * SPEED[n] * max(1, c["threads"]), "maxrss_kib": 4096,
             "seconds": 1 / SPEED[n]} for c in cases for n in ALLOCATORS]
    return {"cases": cases, "runs": runs, "not_built": {},
            "allocators": [{"name": n, "missing": None} for n in ALLOCATORS],
            "workloads": [{"key": "sweep", "label": "sweep", "field": "ops_per_sec",
                           "threads": "t"},
                          {"key": "single", "label": "single", "field": "ops_per_sec",
                           "threads": None}],
            "machine": {"cpus": 2}}


def check_plot_code():
    log = []
    fake_plt = Recorder(log, "plt")
    fake_mpl = types.ModuleType("matplotlib")
    fake_mpl.use = lambda backend: None
    fake_mpl.pyplot = fake_plt
    saved = {k: sys.modules.get(k) for k in ("matplotlib", "matplotlib.pyplot")}
    sys.modules["matplotlib"], sys.modules["matplotlib.pyplot"] = fake_mpl, fake_plt
    try:
        with tempfile.TemporaryDirectory() as out:
            made = plots.plot_all(made_up_results(), out, "x-")
            files = sorted(os.listdir(out))
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    check(made == {"threads": {"sweep": "x-threads-sweep.png"},
                   "relative": "x-relative-throughput.png"} and
          files == ["x-relative-throughput.png", "x-threads-sweep.png"],
          "plot_all: a thread plot and the relative-throughput plot", f"{made} {files}")
    looks = {n: plots.style(i) for i, n in enumerate(ALLOCATORS)}
    lines = [(a, k) for _, m, a, k in log if m == "errorbar"]
    bars = [(a, k) for _, m, a, k in log if m == "bar"]
    check(sorted(k.get("label") for _, k in lines) == sorted(ALLOCATORS),
          "the thread plot: a line per allocator", repr([k.get("label") for _, k in lines]))
    for _, k in lines:
        want = looks.get(k.get("label"), {})
        check(k.get("color") == want.get("color") and k.get("marker") == want.get("marker")
              and k.get("linestyle") == want.get("linestyle"),
              f"line of {k.get('label')}: its colour, marker and line style",
              f"{k} against {want}")
    check(sorted(k.get("label") for _, k in bars) == sorted(ALLOCATORS),
          "the relative plot: bars per allocator", repr([k.get("label") for _, k in bars]))
    for args, k in bars:
        n = k.get("label")
        want = looks.get(n, {})
        check(k.get("color") == want.get("color") and k.get("hatch") == want.get("hatch"),
              f"bars of {n}: its colour and hatch", f"{k} against {want}")
        heights = list(args[1]) if len(args) > 1 else []
        check(len(heights) == 2 and all(abs(h - SPEED.get(n, 0)) < 1e-9 for h in heights),
              f"bars of {n}: its throughput relative to roost's, {SPEED.get(n)}", repr(heights))
    labels = [a[0] for _, m, a, _ in log if m == "set_ylabel"]
    check(len(labels) == 2 and all("higher is better" in lab_ for lab_ in labels),
          "both plots say higher is better on their axis", repr(labels))
    check(not any("lower is better" in str(a) for _, _, a, _ in log),
          "no plot shows what is lower-is-better")


def check_real_plots():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("matplotlib is not installed: the real plots are not drawn (the stand-in was)")
        return
    with tempfile.TemporaryDirectory() as out:
        made = plots.plot_all(made_up_results(), out, "")
        for f in list(made["threads"].values()) + [made["relative"]]:
            check(f is not None and os.path.getsize(os.path.join(out, f)) > 0,
                  f"matplotlib drew {f}")
    print("matplotlib drew the plots")


def main():
    check_measure()
    check_palette()
    check_styles()
    check_plot_code()
    check_real_plots()
    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print("plot palette: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
