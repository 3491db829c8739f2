"""Plots, with matplotlib (in this interpreter, or in another python3 that has it, which runs
`suite.py --plot-json`): throughput against thread count for each swept workload, and every
allocator's throughput relative to roost's (the summary table's figures), one group per
workload. Both read as the tables do: higher is better.

Colours come from a palette made for readers with colour-vision deficiency (PALETTE), and every
allocator also has a marker (lines) or a hatch (bars) of its own, so that no reader depends on
colour alone; tests/plot_palette_check.py checks both.

matplotlib is optional by design: it is imported only here and only when plots are drawn; a
suite run without it anywhere still prints its tables and writes its files, and says why there
are no plots."""

import json
import math
import os
import shutil
import subprocess
import sys

from .allocators import ROOST
from .common import SCRIPT, Installer, last_lines, log, note_written, rel, scale_of
from .report import reference_allocator, summarize
from .workloads import UNITS

# Paul Tol's "muted" qualitative scheme: nine colours chosen to stay apart for readers with
# protanopia, deuteranopia or tritanopia as well as for everyone else (at least 11 CIEDE2000
# units between any two under the simulations tests/plot_palette_check.py runs). One per
# allocator, in the run's order (roost first); a default run has ten allocators, so its last
# (mimalloc-v34) starts the second round.
PALETTE = ("#CC6677", "#332288", "#DDCC77", "#117733", "#88CCEE", "#882255", "#44AA99",
           "#999933", "#AA4499")
# The second cue: a marker per allocator on lines, a hatch on bars; and past the palette's
# length, where colours come round again, dashed lines. The second round leaves out the first
# colour: roost's stays its own.
MARKERS = "os^vD<>pP*Xh"
HATCHES = ("", "//", "..", "xx", "\\\\", "++", "oo", "--", "||", "**", "OO", "/.")


def style(i):
    """The look of the i-th allocator of a plot: {color, marker, linestyle, hatch}, each
    allocator's combination its own."""
    n = len(PALETTE)
    colour = PALETTE[i] if i < n else PALETTE[1 + (i - n) % (n - 1)]
    return {"color": colour, "marker": MARKERS[i % len(MARKERS)],
            "linestyle": "-" if i < len(PALETTE) else "--", "hatch": HATCHES[i % len(HATCHES)]}


def plot_all(results, outdir, prefix):
    """Writes the plots; returns {"threads": {key: file}, "relative": file} (file names)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = summarize(results)
    made = {"threads": {}, "relative": None}
    names = [a["name"] for a in results["allocators"] if not a.get("missing")]
    looks = {n: style(i) for i, n in enumerate(names)}
    by_wl = {}
    for c in results["cases"]:
        if c["wl"] not in results["not_built"]:
            by_wl.setdefault(c["wl"], []).append(c)
    wls = {w["key"]: w for w in results["workloads"]}
    os.makedirs(outdir, exist_ok=True)
    for key, wcases in by_wl.items():
        if len(wcases) < 2:
            continue
        w = wls[key]
        fig, ax = plt.subplots(figsize=(7, 4.2))
        vals = [summary[(c["id"], n)]["figure_median"] for c in wcases for n in names
                if "figure_median" in summary.get((c["id"], n), {})]
        div, pre = scale_of(vals)
        for n in names:
            pts = [(c["threads"], summary[(c["id"], n)]) for c in wcases
                   if "figure_median" in summary.get((c["id"], n), {})]
            if not pts:
                continue
            xs = [p[0] for p in pts]
            ys = [p[1]["figure_median"] / div for p in pts]
            lo = [y - p[1]["figure_min"] / div for y, p in zip(ys, pts)]
            hi = [p[1]["figure_max"] / div - y for y, p in zip(ys, pts)]
            look = looks[n]
            ax.errorbar(xs, ys, yerr=[lo, hi], color=look["color"], marker=look["marker"],
                        linestyle=look["linestyle"], linewidth=2.2 if n == ROOST else 1.2,
                        capsize=2, label=n, zorder=3 if n == ROOST else 2)
        ax.set_xscale("log", base=2)
        ticks = sorted({c["threads"] for c in wcases})
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.set_xlabel("producer/consumer pairs (P = C)" if w["threads"] == "pc" else "threads")
        ax.set_ylabel(f"{pre}{UNITS.get(w['field'], w['field'])} (median, min–max; "
                      "higher is better)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{w['label']}\n({results['machine']['cpus']} CPUs)", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, ncol=2)
        fig.tight_layout()
        fname = f"{prefix}threads-{key}.png"
        fig.savefig(os.path.join(outdir, fname), dpi=110)
        plt.close(fig)
        made["threads"][key] = fname

    # Throughput relative to roost's (the summary table's figures): one group per base case,
    # one bar per allocator.
    ref = reference_allocator(results, summary)

    def ratio(c, n):
        s, r = summary.get((c["id"], n), {}), summary.get((c["id"], ref), {})
        if "figure_median" in s and "figure_median" in r:
            return s["figure_median"] / r["figure_median"]
        return None

    base = [c for c in results["cases"] if c["base"] and c["wl"] not in results["not_built"]]
    base = [c for c in base if ref is not None and any(ratio(c, n) for n in names)]
    if base and names:
        width = 0.8 / len(names)
        wide = min(20, max(8, 0.12 * len(base) * len(names) + 2))
        fig, ax = plt.subplots(figsize=(wide, 4.5))
        low, top = 1.0, 1.0
        for i, n in enumerate(names):
            xs, ys = [], []
            for j, c in enumerate(base):
                y = ratio(c, n)
                if y:
                    xs.append(j + (i - (len(names) - 1) / 2) * width)
                    ys.append(y)
            low, top = min([low] + ys), max([top] + ys)
            look = looks[n]
            ax.bar(xs, ys, width, label=n, color=look["color"], hatch=look["hatch"],
                   edgecolor="black" if n == ref else "#555555",
                   linewidth=1.2 if n == ref else 0.4)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(base)))
        ax.set_xticklabels([c["short"] for c in base], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(f"throughput / {ref}'s (higher is better)")
        if top / low > 8:
            # Ratios on a log scale, ticked at powers of two written as numbers (0.25, 4).
            ax.set_yscale("log", base=2)
            ax.minorticks_off()
            ticks = [2.0 ** k for k in range(math.floor(math.log2(low)),
                                             math.ceil(math.log2(top)) + 1)]
            ax.set_yticks(ticks)
            ax.set_yticklabels([f"{t:g}" for t in ticks])
        ax.set_title(f"Throughput relative to {ref}, per workload (medians; above 1: faster "
                     f"than {ref})", fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8, ncol=min(len(names), 5))
        fig.tight_layout()
        fname = f"{prefix}relative-throughput.png"
        fig.savefig(os.path.join(outdir, fname), dpi=110)
        plt.close(fig)
        made["relative"] = fname
    return made


def has_matplotlib(py=None):
    """Whether the python3 `py` (default: this interpreter) can import matplotlib, which is
    optional (see the module's docstring)."""
    if py is None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            return False
        return True
    try:
        return subprocess.run([py, "-c", "import matplotlib"], capture_output=True,
                              timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def find_plotter(install):
    """A python3 that can import matplotlib (installing it if allowed).

    Returns (path, None) or (None, why)."""
    if has_matplotlib():
        return sys.executable, None
    candidates = []
    for py in (sys.executable, "/usr/bin/python3", shutil.which("python3")):
        if py and os.path.exists(py) and os.path.realpath(py) not in \
                [os.path.realpath(c) for c in candidates]:
            candidates.append(py)
    for py in candidates[1:]:
        if has_matplotlib(py):
            return py, None
    if not install:
        return None, "matplotlib is not importable and --no-install was given"
    tried = []
    why = Installer(True).install("python3-matplotlib")
    if why is None:
        for py in candidates + ["/usr/bin/python3"]:
            if os.path.exists(py) and has_matplotlib(py):
                return py, None
    else:
        tried.append(why)
    log("suite: installing matplotlib with pip")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "matplotlib"],
                       capture_output=True, text=True)
    if r.returncode == 0 and has_matplotlib(sys.executable):
        return sys.executable, None
    tried.append(f"`pip install matplotlib` failed: {last_lines(r.stderr or r.stdout)}")
    return None, "matplotlib could not be installed: " + "; ".join(tried)


def make_plots(results, json_path, targets, install):
    """targets: [(dir, prefix)]. Returns (list of made dicts, note or None)."""
    py, why = find_plotter(install)
    if py is None:
        return None, why
    made = []
    for outdir, prefix in targets:
        if has_matplotlib():
            made.append(plot_all(results, outdir, prefix))
            continue
        r = subprocess.run([py, SCRIPT, "--plot-json", json_path,
                            "--plot-dir", outdir, "--plot-prefix", prefix],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return None, f"plotting with {py} failed: {last_lines(r.stderr)}"
        made.append(json.loads(r.stdout))
    return made, None


def draw(results, json_path, out_dir, docs_plot_dir, install):
    """The plots of a run: into out_dir (suite-*.png) and, for the docs page, into
    docs_plot_dir (when given). Sets results["plots_note"]; returns the plots made in
    docs_plot_dir (plot_all's dict) or None."""
    targets = [(out_dir, "suite-")]
    if docs_plot_dir:
        targets.append((docs_plot_dir, ""))
    made, why = make_plots(results, json_path, targets, install)
    if made is None:
        results["plots_note"] = f"none drawn: {why}"
        log(f"suite: no plots: {why}")
        return None
    for (folder, _), m in zip(targets, made):
        for key, f in m["threads"].items():
            note_written(os.path.join(folder, f), f"plot: {key}, throughput against threads")
        if m["relative"]:
            note_written(os.path.join(folder, m["relative"]),
                         "plot: throughput relative to roost, per workload")
    files = [os.path.join(out_dir, f) for f in
             list(made[0]["threads"].values()) + [made[0]["relative"]] if f]
    results["plots_note"] = ", ".join(f"`{rel(f)}`" for f in files) if files else "none drawn"
    return made[1] if docs_plot_dir else None
