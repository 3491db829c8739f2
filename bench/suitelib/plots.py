"""Plots, with matplotlib (in this interpreter, or in another python3 that has it, which runs
`suite.py --plot-json`): throughput against thread count for each swept workload, and every
allocator's run time relative to the fastest's, one group per workload.

matplotlib is optional by design: it is imported only here and only when plots are drawn; a
suite run without it anywhere still prints its tables and writes its files, and says why there
are no plots."""

import json
import os
import shutil
import subprocess
import sys

from .allocators import ROOST
from .common import SCRIPT, Installer, last_lines, log, rel, scale_of
from .report import summarize
from .workloads import UNITS


def plot_all(results, outdir, prefix):
    """Writes the plots; returns {"threads": {key: file}, "relative": file} (file names)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = summarize(results)
    made = {"threads": {}, "relative": None}
    names = [a["name"] for a in results["allocators"] if not a.get("missing")]
    by_wl = {}
    for c in results["cases"]:
        if c["wl"] not in results["not_built"]:
            by_wl.setdefault(c["wl"], []).append(c)
    wls = {w["key"]: w for w in results["workloads"]}
    markers = "os^vD<>pP*Xh"
    os.makedirs(outdir, exist_ok=True)
    for key, wcases in by_wl.items():
        if len(wcases) < 2:
            continue
        w = wls[key]
        fig, ax = plt.subplots(figsize=(7, 4.2))
        vals = [summary[(c["id"], n)]["figure_median"] for c in wcases for n in names
                if "figure_median" in summary.get((c["id"], n), {})]
        div, pre = scale_of(vals)
        for i, n in enumerate(names):
            pts = [(c["threads"], summary[(c["id"], n)]) for c in wcases
                   if "figure_median" in summary.get((c["id"], n), {})]
            if not pts:
                continue
            xs = [p[0] for p in pts]
            ys = [p[1]["figure_median"] / div for p in pts]
            lo = [y - p[1]["figure_min"] / div for y, p in zip(ys, pts)]
            hi = [p[1]["figure_max"] / div - y for y, p in zip(ys, pts)]
            ax.errorbar(xs, ys, yerr=[lo, hi], marker=markers[i % len(markers)],
                        linewidth=2.2 if n == ROOST else 1.2, capsize=2, label=n,
                        zorder=3 if n == ROOST else 2)
        ax.set_xscale("log", base=2)
        ticks = sorted({c["threads"] for c in wcases})
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.set_xlabel("producer/consumer pairs (P = C)" if w["threads"] == "pc" else "threads")
        ax.set_ylabel(f"{pre}{UNITS.get(w['field'], w['field'])} (median, min–max)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{w['label']}\n({results['machine']['cpus']} CPUs)", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, ncol=2)
        fig.tight_layout()
        fname = f"{prefix}threads-{key}.png"
        fig.savefig(os.path.join(outdir, fname), dpi=110)
        plt.close(fig)
        made["threads"][key] = fname

    # Time relative to the best: one group per base case, one bar per allocator.
    base = [c for c in results["cases"] if c["base"] and c["wl"] not in results["not_built"]]
    base = [c for c in base if any("time_vs_best" in summary.get((c["id"], n), {})
                                   for n in names)]
    if base and names:
        width = 0.8 / len(names)
        wide = min(20, max(8, 0.12 * len(base) * len(names) + 2))
        fig, ax = plt.subplots(figsize=(wide, 4.5))
        top = 1.0
        for i, n in enumerate(names):
            xs, ys = [], []
            for j, c in enumerate(base):
                s = summary.get((c["id"], n), {})
                if "time_vs_best" in s:
                    xs.append(j + (i - (len(names) - 1) / 2) * width)
                    ys.append(s["time_vs_best"])
            top = max([top] + ys)
            ax.bar(xs, ys, width, label=n, edgecolor="black" if n == ROOST else None,
                   linewidth=1.2 if n == ROOST else 0)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(base)))
        ax.set_xticklabels([c["short"] for c in base], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("run time / fastest allocator's (lower is better)")
        if top > 8:
            ax.set_yscale("log", base=2)
        ax.set_title("Time relative to the fastest allocator, per workload (medians)",
                     fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8, ncol=min(len(names), 5))
        fig.tight_layout()
        fname = f"{prefix}relative-time.png"
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
    files = [os.path.join(out_dir, f) for f in
             list(made[0]["threads"].values()) + [made[0]["relative"]] if f]
    results["plots_note"] = f"{len(files)} written to {rel(out_dir)}/"
    return made[1] if docs_plot_dir else None
