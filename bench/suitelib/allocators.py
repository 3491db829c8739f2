"""The allocators: roost, glibc, the peers (peers.py) and the opt-in roost variants, resolved
to a library to preload (or the reason one is missing); and the environment the report
describes: the machine, the compiler and the roost commit.  roost's libraries are preloaded
from copies made as they are resolved, so that a rebuild of the tree while a run goes on does
not change the library the rest of the run measures."""

import atexit
import os
import platform
import re
import shutil
import subprocess
import tempfile

from . import peers
from .common import REPO, rel

ROOST = "roost"
GLIBC = "glibc"

# roost variants, opt-in by name (never in the default set): name -> (library
# file in the build directory, extra environment, what it is).
VARIANTS = {
    "roost-nobatchit": ("libroost.so", {"ROOST_BATCHIT": "0"},
                        "libroost.so with ROOST_BATCHIT=0 (remote frees not batched)"),
    "roost-secure": ("libroost-secure.so", {},
                     "the secure build, libroost-secure.so (ROOST_SECURE=1)"),
    "roost-hardened": ("libroost-hardened.so", {},
                       "the hardened build, libroost-hardened.so (ROOST_HARDENED=1)"),
    "roost-noreserve": ("libroost.so", {"ROOST_SLAB_RESERVE": "0"},
                        "libroost.so with ROOST_SLAB_RESERVE=0 (no per-thread cache of "
                        "empty slabs)"),
    "roost-hugeoff": ("libroost.so", {"ROOST_HUGEPAGES": "off"},
                      "libroost.so with ROOST_HUGEPAGES=off (no transparent huge pages)"),
}

# Peer variants, opt-in by name as well: name -> (the peer, extra environment, what it
# is). MIMALLOC_ALLOW_THP=0 (mimalloc 3's option allow_thp, in both 3.3's and 3.4's
# src/options.c) makes mimalloc disable transparent huge pages for the whole process
# (prctl PR_SET_THP_DISABLE) and never advise them.
PEER_VARIANTS = {
    "mimalloc-v3-nothp": ("mimalloc-v3", {"MIMALLOC_ALLOW_THP": "0"},
                          "mimalloc-v3 with MIMALLOC_ALLOW_THP=0 (no transparent huge pages)"),
    "mimalloc-v34-nothp": ("mimalloc-v34", {"MIMALLOC_ALLOW_THP": "0"},
                           "mimalloc-v34 with MIMALLOC_ALLOW_THP=0 (no transparent huge "
                           "pages)"),
}


def in_roost_family(name):
    """roost itself, a roost variant (roost-NAME) or roost with extra environment
    (roost@VAR=VALUE)."""
    return name == ROOST or name.startswith(ROOST + "-") or name.startswith(ROOST + "@")


class Allocator:
    """lib: the library preloaded (None: none); shown: the path reports give for it (the
    library a copy was made from; lib itself when not given)."""

    def __init__(self, name, lib=None, env=None, version="", source="", missing=None,
                 shown=None):
        self.name, self.lib, self.env = name, lib, dict(env or {})
        self.version, self.source, self.missing = version, source, missing
        self.shown = shown or lib

    @property
    def roost_family(self):
        return in_roost_family(self.name)

    def describe(self):
        parts = []
        if self.lib:
            parts.append(f"`LD_PRELOAD={rel(self.shown)}`")
        else:
            parts.append("no preload")
        if self.env:
            parts.append(" ".join(f"`{k}={v}`" for k, v in sorted(self.env.items())))
        return ", ".join(parts)


def glibc_version():
    try:
        r = subprocess.run(["ldd", "--version"], capture_output=True, text=True)
    except OSError:
        return "?"
    m = re.search(r"(\d+\.\d+)\s*$", (r.stdout.splitlines() or [""])[0])
    return m.group(1) if m else "?"


def git_commit():
    try:
        commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain",
                                "--untracked-files=no", "--", "src", "include",
                                "CMakeLists.txt"],
                               capture_output=True, text=True).stdout.strip() != ""
        subject = subprocess.run(["git", "-C", REPO, "log", "-1", "--format=%s"],
                                 capture_output=True, text=True).stdout.strip()
    except OSError:
        return "", False, ""
    return commit, dirty, subject


_snapshot_dir = None
_snapshots = {}  # library -> its copy


def snapshot(lib):
    """A copy of roost library `lib` (an absolute path), made the first time it is asked for, in
    a folder of this process's that goes when it exits; the same copy after that."""
    global _snapshot_dir
    if lib not in _snapshots:
        if _snapshot_dir is None:
            _snapshot_dir = tempfile.mkdtemp(prefix="roost-bench-libs.")
            atexit.register(shutil.rmtree, _snapshot_dir, True)
        # One folder per copy: two libraries may share a file name.
        folder = os.path.join(_snapshot_dir, str(len(_snapshots)))
        os.mkdir(folder)
        _snapshots[lib] = os.path.join(folder, os.path.basename(lib))
        shutil.copy2(lib, _snapshots[lib])
    return _snapshots[lib]


def parse_roost_libs(specs, error):
    """--roost-lib's values (roost-NAME=PATH each) as {name: absolute path}; error(message)
    is called (and must not return) on a malformed one or a missing file."""
    libs = {}
    for spec in specs:
        name, _, path = spec.partition("=")
        if not name.startswith(ROOST + "-") or name in VARIANTS or not path:
            error(f"--roost-lib {spec}: expected roost-NAME=PATH, NAME not a variant's")
        if not os.path.exists(path):
            error(f"--roost-lib {spec}: {path} does not exist")
        libs[name] = os.path.abspath(path)
    return libs


def add_allocator_args(ap, default):
    """The options of a measuring script that takes allocators as bench/suite.py names them:
    --build, --allocators (`default` when not given), --roost-lib, --peers-dir, --no-install.
    allocators_from_args() resolves them."""
    ap.add_argument("--build", default=os.path.join(REPO, "build", "release"),
                    help="where libroost.so and bench/bench_* are (default build/release)")
    ap.add_argument("--allocators", default=default,
                    help=f"comma-separated (default {default}); NAME@VAR=VALUE adds "
                         "environment, as in bench/suite.py")
    ap.add_argument("--roost-lib", action="append", default=[], metavar="roost-NAME=PATH",
                    help="another roost library (e.g. an earlier commit's) as allocator "
                         "roost-NAME (repeatable)")
    ap.add_argument("--peers-dir", default=os.path.join(REPO, "build", "peers"))
    ap.add_argument("--no-install", action="store_true", help="do not install or build peers")


def allocators_from_args(ap, args):
    """The allocators add_allocator_args()'s options chose, resolved (resolve_allocators)."""
    extra = parse_roost_libs(args.roost_lib, ap.error)
    return resolve_allocators(args.allocators.split(","), args.build, not args.no_install,
                              args.peers_dir, extra)


def resolve_allocators(chosen, build_dir, install, peers_dir, extra_libs=None):
    """Allocators in table order. chosen: list of names, or None for the default set.
    extra_libs: name -> path of other roost libraries (--roost-lib)."""
    extra_libs = extra_libs or {}
    names = chosen
    commit, dirty, _ = git_commit()
    roost_version = (commit or "?") + ("+dirty" if dirty else "")

    def roost_like(name, libfile, env, what):
        lib = os.path.join(build_dir, libfile)
        if not os.path.exists(lib):
            return Allocator(name, env=env, missing=f"{rel(lib)} is not built")
        return Allocator(name, snapshot(os.path.abspath(lib)), env, roost_version, what,
                         shown=lib)

    def one(name, found):
        base, _, envspec = name.partition("@")
        extra = {}
        if envspec:
            for kv in envspec.split("@"):
                k, _, v = kv.partition("=")
                extra[k] = v
        if base == ROOST:
            a = roost_like(name, "libroost.so", extra, "this repository")
        elif base in VARIANTS:
            libfile, env, what = VARIANTS[base]
            a = roost_like(name, libfile, dict(env, **extra), what)
        elif base in extra_libs:
            a = Allocator(name, snapshot(extra_libs[base]), extra, "",
                          "a roost library given by --roost-lib", shown=extra_libs[base])
        elif base == GLIBC:
            a = Allocator(name, None, extra, glibc_version(), "the C library (no preload)")
        elif base in PEER_VARIANTS:
            peer, env, what = PEER_VARIANTS[base]
            p = found[peer]
            if "missing" in p:
                a = Allocator(name, env=dict(env, **extra), missing=p["missing"])
            else:
                a = Allocator(name, p["lib"], dict(env, **extra), p["version"],
                              f"{p['source']}; {what}")
        else:
            p = found[base]
            if "missing" in p:
                a = Allocator(name, env=extra, missing=p["missing"])
            else:
                a = Allocator(name, p["lib"], extra, p["version"], p["source"])
        return a

    if names is None:
        found = peers.ensure_peers(peers_dir, None, install)
        order = [ROOST, GLIBC] + list(found)
    else:
        peer_names = []
        for n in names:
            base = n.partition("@")[0]
            base = PEER_VARIANTS[base][0] if base in PEER_VARIANTS else base
            if (base not in (ROOST, GLIBC) and base not in VARIANTS and base not in extra_libs
                    and base not in peer_names):
                peer_names.append(base)
        found = peers.ensure_peers(peers_dir, peer_names, install) if peer_names else {}
        order = names
    return [one(n, found) for n in order]


# ----------------------------------------------------------------------------------------------
# The machine.

def read_first(path, pattern):
    try:
        with open(path) as f:
            for line in f:
                m = re.match(pattern, line)
                if m:
                    return m.group(1).strip()
    except OSError:
        pass
    return None


def compiler_of(build_dir):
    cache = os.path.join(build_dir, "CMakeCache.txt")
    out = {}
    for lang, var in (("c", "CMAKE_C_COMPILER"), ("cxx", "CMAKE_CXX_COMPILER")):
        path = read_first(cache, rf"{var}:\w+=(.*)")
        if not path:
            continue
        try:
            v = subprocess.run([path, "--version"], capture_output=True, text=True)
            out[lang] = (v.stdout.splitlines() or [path])[0].strip()
        except OSError:
            out[lang] = path
    out["build_type"] = read_first(cache, r"CMAKE_BUILD_TYPE:\w+=(.*)") or "?"
    return out


def machine_info(build_dir):
    cpu = read_first("/proc/cpuinfo", r"model name\s*:\s*(.*)") or platform.processor() or "?"
    mem_kib = read_first("/proc/meminfo", r"MemTotal:\s*(\d+)")
    distro = read_first("/etc/os-release", r'PRETTY_NAME="?([^"\n]*)"?') or platform.platform()
    comp = compiler_of(build_dir)
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_gib": round(int(mem_kib) / 1048576, 1) if mem_kib else None,
        "kernel": platform.release(),
        "distro": distro,
        "arch": platform.machine(),
        "compiler": comp.get("cxx") or comp.get("c") or "?",
        "c_compiler": comp.get("c", "?"),
        "build_type": comp.get("build_type", "?"),
        "python": platform.python_version(),
    }

