"""What every module of bench/suitelib uses: the repository's paths, logging, the list of files
a command wrote, number formatting, the last lines of a command's output, and installing a
Debian package on demand."""

import os
import shutil
import subprocess
import sys

BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # bench/
REPO = os.path.dirname(BENCH_DIR)
SCRIPT = os.path.join(BENCH_DIR, "suite.py")  # the suite's command (plots run it again)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def rel(path):
    p = os.path.abspath(path)
    return os.path.relpath(p, REPO) if p.startswith(REPO + os.sep) else p


# The files a command wrote (absolute path, what it holds), in order: each command notes what
# it writes (note_written) and names them all at its end (list_written).
_WRITTEN = []
# Set by bench/run: the file where the commands it runs append their lists, for its one list at
# the end of everything.
WRITTEN_LIST_ENV = "ROOST_BENCH_WRITTEN"


def note_written(path, what):
    p = os.path.abspath(path)
    if all(w[0] != p for w in _WRITTEN):
        _WRITTEN.append((p, what))


def forget_written():
    """Forgets the files noted so far (a self-test's, removed after it)."""
    _WRITTEN.clear()


def shown_path(path):
    """`path` as the user can open it from here: relative to the working directory when it lies
    under it, else absolute."""
    p, here = os.path.abspath(path), os.getcwd()
    return os.path.relpath(p, here) if p.startswith(here + os.sep) else p


def written_lines():
    """One line per file noted: its path (shown_path) and what it holds."""
    return [f"  {shown_path(p)}{'/' if os.path.isdir(p) else ''}  ({what})" for p, what in _WRITTEN]


def list_written(who):
    """The end of a command: every file it wrote, one line each on stderr, or under bench/run
    appended to bench/run's list, which it prints last (nothing when it wrote none)."""
    lines = written_lines()
    if not lines:
        return
    manifest = os.environ.get(WRITTEN_LIST_ENV)
    if manifest:
        try:
            with open(manifest, "a") as f:
                f.write("".join(line + "\n" for line in lines))
            return
        except OSError as e:
            log(f"{who}: cannot add to bench/run's list of files ({e}); here it is")
    log(f"{who}: wrote {len(lines)} file{'s' if len(lines) != 1 else ''}:")
    for line in lines:
        log(line)


def last_lines(text, n=1):
    """The last n non-blank lines of a command's output, joined with ' | ' ('?' if none)."""
    lines = [l for l in (text or "").strip().splitlines() if l.strip()]
    return " | ".join(lines[-n:]) if lines else "?"


def parse_list(s):
    return [x.strip() for x in s.split(",") if x.strip()]


def fmt_duration(secs):
    return f"{secs:.0f} s" if secs < 120 else f"{secs / 60:.1f} minutes"


def fmt_mib(kib):
    return f"{kib / 1024:.1f}"


def scale_of(values):
    top = max(values) if values else 0
    if top >= 1e6:
        return 1e6, "M "
    if top >= 1e4:
        return 1e3, "k "
    return 1.0, ""


def fmt_fig(x, div):
    v = x / div
    if v < 1:  # runs per second of the real programs
        return f"{v:.3f}"
    return f"{v:.2f}" if v < 100 else f"{v:.1f}" if v < 1000 else f"{v:.0f}"


class Installer:
    """`apt-get install` on demand, for what the benchmarks need from Debian (peers, valgrind,
    matplotlib): only as root and when enabled; `apt-get update` at most once per Installer."""

    def __init__(self, enabled):
        self.enabled = enabled
        self.updated = None  # None: not tried; "": done; else why it failed

    def _run(self, cmd):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
        if r.returncode != 0:
            return f"`{' '.join(cmd)}` failed: {last_lines(r.stderr)}"
        return None

    def install(self, package):
        """Returns None on success, else the reason it could not be installed."""
        if not self.enabled:
            return "not installed, and --no-install was given"
        if os.geteuid() != 0:
            return f"not installed, and not root to `apt-get install {package}`"
        if shutil.which("apt-get") is None:
            return f"not installed, and no apt-get to install {package}"
        if self.updated is None:
            log("bench: apt-get update")
            self.updated = self._run(["apt-get", "update", "-qq"]) or ""
        log(f"bench: installing {package} with apt-get")
        err = self._run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", package])
        if err and self.updated:
            err += f" (after {self.updated})"
        return err
