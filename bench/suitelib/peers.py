"""The peer allocators the benchmarks compare roost against (command: bench/peers.py).

Provides each peer as a shared library to LD_PRELOAD, ready and checked:

- Debian 12 packages, installed with apt-get when missing and running as root
  (`apt-get update` at most once per call, then `apt-get install`):
    mimalloc   libmimalloc2.0        libmimalloc.so.2           (mimalloc 2.0.9)
    jemalloc   libjemalloc2          libjemalloc.so.2
    tcmalloc   libtcmalloc-minimal4  libtcmalloc_minimal.so.4   (gperftools)
    tbbmalloc  libtbbmalloc2         libtbbmalloc_proxy.so.2    (the proxy: the
               package's libtbbmalloc.so.2 only exports scalable_malloc & co.)
- PyPI wheels that ship an allocator's shared library, downloaded with pip
  (`python3 -m pip download --no-deps --only-binary=:all:`, by this python3
  or Debian's, whose python3-pip is installed where neither has pip; the pinned
  version) into <build_root>/pypi/ and the library taken out of the wheel (a
  zip) into <build_root>/<name>-<version>/; peer.json records it as for a
  built peer, so later calls download nothing:
    mimalloc-v34 cmeel-mimalloc 3.4.3 (cmeel.prefix/lib/libmimalloc.so.3.4:
                 mimalloc 3.4.3, release, MI_OVERRIDE)  -> libmimalloc.so.3.4
- built here from the sources that crates.io's "-sys" crates carry, with each
  allocator's own CMake build in Release:
    snmalloc     snmalloc-sys (its upstream/ tree; the crate's version is
                 snmalloc's release since 0.7.4)          -> libsnmallocshim.so
    mimalloc-v2  libmimalloc-sys (c_src/mimalloc/v2)      -> libmimalloc.so
    mimalloc-v3  libmimalloc-sys (c_src/mimalloc/v3)      -> libmimalloc.so
  and their hardened builds, from the same sources into their own build
  directories (opt-in: only when named, never in the default set):
    snmalloc-checks     snmalloc's checked shim (SNMALLOC_CHECK_CLIENT)
                                                  -> libsnmallocshim-checks.so
    mimalloc-v2-secure  v2 with -DMI_SECURE=ON    -> libmimalloc-secure.so
    mimalloc-v3-secure  v3 with -DMI_SECURE=ON    -> libmimalloc-secure.so
  and two hardened allocators (opt-in as well) whose crates build no
  preloadable library, compiled here with the system C/C++ compiler ($CC,
  $CXX, else cc, c++), one command per source file:
    scudo        scudo-sys (scudo-standalone/: LLVM's standalone scudo, a
                 snapshot with no release number: the version shown is the
                 crate's): compiler-rt's clang_rt.scudo_standalone shared
                 runtime (the core, wrappers_c.cpp on scudo's default Linux
                 config, wrappers_cpp.cpp) with its CMakeLists' flags; no
                 GWP-ASan (not in the crate)                -> libscudo.so
    hardened_malloc
                 hardened-malloc-sys (vendor/hardened-malloc/: GrapheneOS's
                 hardened_malloc, whose version is the crate's major) as its
                 Makefile (which the crate leaves out) builds it, with
                 config/default.mk, less -Werror   -> libhardened_malloc.so
    hardened_malloc-light
                 the same with config/light.mk (VARIANT=light)
                                                   -> libhardened_malloc-light.so
  The crates are pinned (CRATES below). cargo fetches them into its own
  registry cache (~/.cargo/registry, or $CARGO_HOME): a throwaway Cargo project
  under <build_root>/cargo/ depends on the crate, `cargo fetch` downloads it and
  `cargo metadata` says where its sources were unpacked. Nothing is copied:
  CMake (or the compiler) reads the sources in the cargo cache and builds into
  <build_root>/<name>-<version>/ (log: build.log there). libmimalloc-sys leaves
  out mimalloc's cmake/ directory, whose mimalloc-config-version.cmake and
  JoinPaths.cmake the CMakeLists includes by relative path: stand-ins for both
  are generated under <build_root>/<name>-<version>/stand-ins/ and found
  through CMAKE_MODULE_PATH (CMake's include() looks a name up there, as
  "<name>.cmake", before it reads the file next to the CMakeLists).
  <name>-<version>/peer.json records a finished build; a later call that finds
  it (same crate, version and options) and the library does nothing more.

Every library, found or built, must pass a preload check before it is offered:
`LD_PRELOAD=<lib> python3 -c ...` calls malloc/free and asks dladdr() which
object `malloc` resolves to, which must be <lib>. A peer that cannot be had
(no root, no network, a failed build or check) comes back as
{"missing": "<reason>"}, never as an exception and never left out.

    from suitelib.peers import ensure_peers
    peers = ensure_peers("build/peers")   # {name: {"lib", "version", "source"} | {"missing"}}
    ensure_peers(names=["snmalloc-checks"])   # an opt-in peer: only by name

    python3 bench/peers.py [--build-root DIR] [--no-install] [--only a,b]

prints the JSON on stdout and one line per peer on stderr; it exits 1 if any
peer is missing, 2 on bad arguments.
"""

import argparse
import collections
import concurrent.futures
import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time

from .common import REPO, Installer, last_lines, log, note_written, parse_list

DEFAULT_BUILD_ROOT = os.path.join("build", "peers")
LIBDIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
           "/lib/x86_64-linux-gnu")

# Debian peers: name -> (package, shared object to preload).
DEBIAN = collections.OrderedDict([
    ("mimalloc", ("libmimalloc2.0", "libmimalloc.so.2")),
    ("jemalloc", ("libjemalloc2", "libjemalloc.so.2")),
    ("tcmalloc", ("libtcmalloc-minimal4", "libtcmalloc_minimal.so.4")),
    ("tbbmalloc", ("libtbbmalloc2", "libtbbmalloc_proxy.so.2")),
])

# Crates whose sources we build (pinned: bump here, and the next call rebuilds).
# snmalloc-sys 0.7.6 is the newest snmalloc-sys and carries snmalloc 0.7.6;
# libmimalloc-sys 0.1.49 carries mimalloc 2.3.2 (v2/) and 3.3.2 (v3/); scudo-sys 0.2.2
# (the newest) a snapshot of LLVM's scudo standalone; hardened-malloc-sys 16.0.2026071503
# (the newest) hardened_malloc 16.
CRATES = {
    "snmalloc-sys": "0.7.6",
    "libmimalloc-sys": "0.1.49",
    "scudo-sys": "0.2.2",
    "hardened-malloc-sys": "16.0.2026071503",
}

# Built peers: name -> crate, source directory inside the crate, CMake
# options, target, library file, version source; "opt_in": left out of the
# default set (the hardened builds, for bench/misuse_compare.py). "build" names
# a direct compiler build (_DIRECT_BUILDS) instead of CMake's; its "options"
# choose the variant (and, like CMake's, key the cache).
_SNMALLOC_OPTIONS = ["-DSNMALLOC_BUILD_TESTING=OFF", "-DSNMALLOC_STATIC_LIBRARY=OFF"]
_MIMALLOC_OPTIONS = ["-DMI_BUILD_SHARED=ON", "-DMI_BUILD_STATIC=OFF", "-DMI_BUILD_OBJECT=OFF",
                     "-DMI_BUILD_TESTS=OFF", "-DMI_OVERRIDE=ON"]
BUILT = collections.OrderedDict([
    ("snmalloc", {
        "crate": "snmalloc-sys", "subdir": "upstream", "target": "snmallocshim",
        "lib": "libsnmallocshim.so", "version_from": "crate", "options": _SNMALLOC_OPTIONS}),
    ("mimalloc-v2", {
        "crate": "libmimalloc-sys", "subdir": "c_src/mimalloc/v2", "target": "mimalloc",
        "lib": "libmimalloc.so", "version_from": "mimalloc.h", "options": _MIMALLOC_OPTIONS}),
    ("mimalloc-v3", {
        "crate": "libmimalloc-sys", "subdir": "c_src/mimalloc/v3", "target": "mimalloc",
        "lib": "libmimalloc.so", "version_from": "mimalloc.h", "options": _MIMALLOC_OPTIONS}),
    # snmalloc's CMakeLists builds this shim from the same sources with
    # SNMALLOC_CHECK_CLIENT defined (and its checked memcpy where it can override it).
    ("snmalloc-checks", {
        "crate": "snmalloc-sys", "subdir": "upstream", "target": "snmallocshim-checks",
        "lib": "libsnmallocshim-checks.so", "version_from": "crate",
        "options": _SNMALLOC_OPTIONS, "opt_in": True}),
    # MI_SECURE=ON defines MI_SECURE=4 and names the library mimalloc-secure.
    ("mimalloc-v2-secure", {
        "crate": "libmimalloc-sys", "subdir": "c_src/mimalloc/v2", "target": "mimalloc",
        "lib": "libmimalloc-secure.so", "version_from": "mimalloc.h",
        "options": _MIMALLOC_OPTIONS + ["-DMI_SECURE=ON"], "opt_in": True}),
    ("mimalloc-v3-secure", {
        "crate": "libmimalloc-sys", "subdir": "c_src/mimalloc/v3", "target": "mimalloc",
        "lib": "libmimalloc-secure.so", "version_from": "mimalloc.h",
        "options": _MIMALLOC_OPTIONS + ["-DMI_SECURE=ON"], "opt_in": True}),
    ("scudo", {
        "crate": "scudo-sys", "subdir": "scudo-standalone", "build": "scudo",
        "lib": "libscudo.so", "version_from": "crate", "options": [], "opt_in": True}),
    ("hardened_malloc", {
        "crate": "hardened-malloc-sys", "subdir": "vendor/hardened-malloc",
        "build": "hardened_malloc", "lib": "libhardened_malloc.so",
        "version_from": "crate major", "options": ["VARIANT=default"], "opt_in": True}),
    ("hardened_malloc-light", {
        "crate": "hardened-malloc-sys", "subdir": "vendor/hardened-malloc",
        "build": "hardened_malloc", "lib": "libhardened_malloc-light.so",
        "version_from": "crate major", "options": ["VARIANT=light"], "opt_in": True}),
])

# PyPI peers: name -> the distribution, its pinned version, and the library's path inside
# its wheel (the file preloaded, under its own name in <build_root>/<name>-<version>/).
# cmeel-mimalloc 3.4.3 is mimalloc 3.4.3, the newest release (the crate above pins 3.3).
PYPI = collections.OrderedDict([
    ("mimalloc-v34", {"dist": "cmeel-mimalloc", "version": "3.4.3",
                      "member": "cmeel.prefix/lib/libmimalloc.so.3.4"}),
])

# Table order: the PyPI mimalloc right after the crate's mimalloc-v3.
PEER_NAMES = list(DEBIAN) + [n for n in BUILT if not BUILT[n].get("opt_in")] + list(PYPI) + \
    [n for n in BUILT if BUILT[n].get("opt_in")]
OPT_IN_PEERS = [n for n, spec in BUILT.items() if spec.get("opt_in")]
DEFAULT_PEERS = [n for n in PEER_NAMES if n not in OPT_IN_PEERS]


def nproc():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


# --- Debian packages ------------------------------------------------------------------------


def locate(soname):
    for d in LIBDIRS:
        p = os.path.join(d, soname)
        if os.path.exists(p):
            return p
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    except OSError:
        return None
    m = re.search(r"\s" + re.escape(soname) + r"\s.*=>\s*(\S+)", out)
    return m.group(1) if m else None


def package_version(package):
    if shutil.which("dpkg-query") is None:
        return None
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True,
                       text=True)
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


def upstream_version(debian_version):
    """'1:2.0.9+ds-1' -> '2.0.9': no epoch, Debian revision or repack suffix."""
    v = debian_version.split(":", 1)[-1]
    if "-" in v:
        v = v.rsplit("-", 1)[0]
    return re.split(r"[+~]", v, 1)[0]


def _debian_peer(name, installer):
    package, soname = DEBIAN[name]
    path = locate(soname)
    reason = None
    if path is None:
        reason = installer.install(package)
        path = locate(soname)
    if path is None:
        return {"missing": f"{soname} not found: " + (reason or f"{package} has no {soname}")}
    ver = package_version(package)
    if ver is None:
        return {"lib": path, "version": "?", "source": f"{path} (not from dpkg package {package})"}
    return {"lib": path, "version": upstream_version(ver), "source": f"debian {package} {ver}"}


# --- preload check --------------------------------------------------------------------------

_CHECK = r"""
import ctypes, sys
class Info(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]
g = ctypes.CDLL(None)
g.malloc.restype = ctypes.c_void_p
g.malloc.argtypes = [ctypes.c_size_t]
g.free.argtypes = [ctypes.c_void_p]
ps = [g.malloc(n) for n in (8, 100, 5000, 300000)]
if not all(ps):
    sys.exit("malloc returned NULL")
for p in ps:
    ctypes.memset(p, 0x5a, 8)
    g.free(p)
try:
    dladdr = g.dladdr
except AttributeError:
    dladdr = ctypes.CDLL("libdl.so.2").dladdr
dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(Info)]
info = Info()
if not dladdr(ctypes.cast(g.malloc, ctypes.c_void_p), ctypes.byref(info)):
    sys.exit("dladdr(malloc) failed")
print(info.fname.decode())
"""


def preload_check(lib, timeout=60):
    """None if `lib` preloaded into a Python process provides its malloc, else why not."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "MALLOC_CONF", "MIMALLOC_VERBOSE", "MIMALLOC_SHOW_STATS")}
    env["LD_PRELOAD"] = os.path.abspath(lib)
    try:
        r = subprocess.run([sys.executable, "-c", _CHECK], env=env, capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"preload check timed out after {timeout} s"
    if r.returncode != 0:
        return f"preload check exited {r.returncode}: {last_lines(r.stderr + r.stdout)}"
    found = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    if not found or os.path.realpath(found) != os.path.realpath(lib):
        return f"preload not in effect: malloc comes from {found or '?'}"
    return None


# --- crates ---------------------------------------------------------------------------------


def _run_logged(cmd, logf, cwd=None, env=None):
    """Runs cmd with its output appended to the open log file; returns its exit status."""
    logf.write(f"\n$ {' '.join(cmd)}\n")
    logf.flush()
    r = subprocess.run(cmd, cwd=cwd, env=env, stdout=logf, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL)
    logf.flush()
    return r.returncode


def _file_tail(path, n=15):
    """The last n non-blank lines of a file."""
    try:
        with open(path, errors="replace") as f:
            return [l for l in f.read().splitlines() if l.strip()][-n:]
    except OSError:
        return []


class CrateSources:
    """Fetches pinned crates with cargo and finds their unpacked sources (once per crate)."""

    def __init__(self, build_root):
        self.root = os.path.join(build_root, "cargo")
        self.found = {}  # crate -> (source dir, None) or (None, reason)

    def get(self, crate):
        if crate not in self.found:
            self.found[crate] = self._fetch(crate)
        return self.found[crate]

    def _fetch(self, crate):
        version = CRATES[crate]
        cargo = shutil.which("cargo")
        if cargo is None:
            for c in (os.path.join(os.environ.get("CARGO_HOME", ""), "bin", "cargo"),
                      os.path.expanduser("~/.cargo/bin/cargo")):
                if os.path.isfile(c) and os.access(c, os.X_OK):
                    cargo = c
                    break
        if cargo is None:
            return None, "cargo not found (needed to fetch the crate's sources)"
        proj = os.path.join(self.root, f"{crate}-{version}")
        os.makedirs(proj, exist_ok=True)
        with open(os.path.join(proj, "Cargo.toml"), "w") as f:
            f.write("# Generated by bench/suitelib/peers.py: only here so that `cargo fetch`\n"
                    "# downloads the crate below into cargo's registry cache. Never built.\n"
                    "[package]\n"
                    f'name = "roost-peer-{crate}"\n'
                    'version = "0.0.0"\n'
                    'edition = "2021"\n'
                    "publish = false\n\n"
                    "[lib]\n"
                    'path = "lib.rs"\n\n'
                    "[dependencies]\n"
                    f'{crate} = {{ version = "={version}", default-features = false }}\n\n'
                    "[workspace]\n")
        with open(os.path.join(proj, "lib.rs"), "w") as f:
            f.write("")
        logpath = os.path.join(proj, "cargo.log")
        with open(logpath, "w") as logf:
            manifest = ["--manifest-path", os.path.join(proj, "Cargo.toml")]
            # One retry, not cargo's default 3 with back-off: a machine without network
            # should learn it in seconds.
            st = _run_logged([cargo, "fetch", "--quiet"] + manifest, logf,
                             env=dict(os.environ, CARGO_NET_RETRY="1"))
            if st != 0:  # no network? The crate may already be in cargo's cache.
                online = _file_tail(logpath, 1)  # the innermost cause
                st = _run_logged([cargo, "fetch", "--quiet", "--offline"] + manifest, logf)
                if st != 0:
                    return None, (f"`cargo fetch` of {crate} ={version} failed (and it is not "
                                  f"in cargo's cache; see {logpath}): "
                                  f"{' '.join(online).strip() or '?'}")
            r = subprocess.run([cargo, "metadata", "--format-version", "1", "--offline",
                                "--quiet"] + manifest, capture_output=True, text=True)
        if r.returncode != 0:
            return None, f"`cargo metadata` failed: {last_lines(r.stderr)}"
        for pkg in json.loads(r.stdout)["packages"]:
            if pkg["name"] == crate and pkg["version"] == version:
                return os.path.dirname(pkg["manifest_path"]), None
        return None, f"{crate} {version} is not among the fetched packages"


def _mimalloc_version(src):
    try:
        with open(os.path.join(src, "include", "mimalloc.h")) as f:
            m = re.search(r"#define\s+MI_MALLOC_VERSION\s+(\d+)", f.read())
    except OSError:
        m = None
    if not m:
        return None
    v = int(m.group(1))  # major, then 2 digits minor, 2 digits patch
    return f"{v // 10000}.{v // 100 % 100}.{v % 100}"


def _mimalloc_stand_ins(src, outdir, version):
    """Stand-ins for the cmake/ files libmimalloc-sys leaves out; returns CMake options."""
    major, minor, patch = version.split(".")
    files = {
        # Sets what the CMakeLists reads: mi_version_{major,minor,patch}, mi_version.
        "mimalloc-config-version.cmake": (
            "# Stand-in generated by roost's bench/suitelib/peers.py (the crate omits "
            "mimalloc's).\n"
            f"set(mi_version_major {major})\n"
            f"set(mi_version_minor {minor})\n"
            f"set(mi_version_patch {patch})\n"
            "set(mi_version ${mi_version_major}.${mi_version_minor})\n"
            "set(PACKAGE_VERSION ${mi_version})\n"),
        # join_paths(OUT a b ...): b, c ... appended to a, an absolute one replacing it.
        "JoinPaths.cmake": (
            "# Stand-in generated by roost's bench/suitelib/peers.py (the crate omits "
            "mimalloc's).\n"
            "function(join_paths out)\n"
            "  set(acc \"\")\n"
            "  foreach(part IN LISTS ARGN)\n"
            "    if(part STREQUAL \"\")\n"
            "      continue()\n"
            "    elseif(IS_ABSOLUTE \"${part}\" OR acc STREQUAL \"\")\n"
            "      set(acc \"${part}\")\n"
            "    else()\n"
            "      string(REGEX REPLACE \"/+$\" \"\" acc \"${acc}\")\n"
            "      set(acc \"${acc}/${part}\")\n"
            "    endif()\n"
            "  endforeach()\n"
            "  set(${out} \"${acc}\" PARENT_SCOPE)\n"
            "endfunction()\n"),
    }
    needed = [n for n in files if not os.path.exists(os.path.join(src, "cmake", n))]
    if not needed:
        return []
    d = os.path.join(outdir, "stand-ins")
    os.makedirs(os.path.join(d, "cmake"), exist_ok=True)
    for n in needed:
        # include("cmake/X.cmake") first looks for module "cmake/X.cmake" + ".cmake" in
        # CMAKE_MODULE_PATH, so this name is found before the (missing) source file.
        with open(os.path.join(d, "cmake", n + ".cmake"), "w") as f:
            f.write(files[n])
    return [f"-DCMAKE_MODULE_PATH={d}"]


# --- direct builds (crates without a build of a preloadable library) ------------------------


class _BuildError(Exception):
    """A direct build cannot start (no compiler, a file the build needs is not in the crate)."""


def _compiler(var, default):
    """The words of $CC or $CXX, else the default driver; _BuildError if it is not there."""
    cmd = os.environ.get(var, "").split() or [default]
    if shutil.which(cmd[0]) is None:
        raise _BuildError(f"no C{'++' if var == 'CXX' else ''} compiler: {cmd[0]} not found")
    return cmd


def _accepts(cmd, flags, lang="c", code="int roost_probe;\n"):
    """Whether the compiler takes `flags` (and compiles `code` with them) without a warning."""
    try:
        r = subprocess.run(cmd + ["-x", lang, "-c", "-o", os.devnull, "-Werror"] + flags + ["-"],
                           input=code, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def _first_accepted(cmd, choices, lang="c", code="int roost_probe;\n"):
    """The first list of flags in `choices` the compiler takes ([] if none)."""
    return next((c for c in choices if _accepts(cmd, c, lang, code)), [])


def _compile_all(cmds, logf):
    """Runs the compile commands, nproc() at a time, their output appended to the log in
    order; returns the first non-zero exit status, or 0."""
    def one(cmd):
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           stdin=subprocess.DEVNULL)
        return r.returncode, r.stdout

    with concurrent.futures.ThreadPoolExecutor(max(1, min(nproc(), len(cmds)))) as ex:
        results = list(ex.map(one, cmds))
    status = 0
    for cmd, (st, out) in zip(cmds, results):
        logf.write(f"\n$ {' '.join(cmd)}\n{out}")
        status = status or st
    logf.flush()
    return status


def _compile_and_link(jobs, link, libs, out, logf):
    """jobs: [(compile command without -c/-o, source)]; link: the link command up to the
    objects, libs: what follows them. Objects go to <out>/obj/. Returns (exit status, the step
    that failed, log offset where that step's output starts)."""
    objdir = os.path.join(out, "obj")
    os.makedirs(objdir, exist_ok=True)
    objs = [os.path.join(objdir, os.path.basename(s) + ".o") for _, s in jobs]
    start = logf.tell()
    st = _compile_all([cmd + ["-c", s, "-o", o] for (cmd, s), o in zip(jobs, objs)], logf)
    if st != 0:
        return st, "compiling", start
    start = logf.tell()
    return _run_logged(link + objs + libs, logf), "linking", start


# compiler-rt's clang_rt.scudo_standalone shared runtime (scudo-standalone/CMakeLists.txt):
# SCUDO_SOURCES, the C wrappers (wrappers_c.cpp: malloc & co. on scudo::Config, the default
# config of the platform) and the C++ ones (operator new/delete), with its SCUDO_CFLAGS (less
# -g; no GWP-ASan) and SCUDO_LINK_FLAGS. The runtime uses no C++ library; g++ before 13 has no
# -nostdlib++, so --as-needed keeps libstdc++ out instead.
_SCUDO_SOURCES = ["checksum.cpp", "common.cpp", "crc32_hw.cpp", "flags_parser.cpp", "flags.cpp",
                  "fuchsia.cpp", "linux.cpp", "release.cpp", "report.cpp", "string_utils.cpp",
                  "wrappers_c.cpp", "wrappers_cpp.cpp"]
_SCUDO_CFLAGS = ["-std=c++17", "-O3", "-fPIC", "-fvisibility=hidden", "-fno-exceptions",
                 "-fno-rtti", "-fno-lto", "-ffunction-sections", "-fdata-sections", "-Wall",
                 "-Werror=conversion", "-nostdinc++"]
_SCUDO_LDFLAGS = ["-shared", "-pthread", "-Wl,-z,defs,-z,now,-z,relro", "-Wl,--gc-sections",
                  "-Wl,--as-needed"]
# crc32_hw.cpp: SSE 4.2 (x86) or the Armv8 CRC32 extension (clang's -mcrc, GCC's -march).
_SCUDO_CRC_FLAGS = [["-msse4.2"], ["-mcrc"], ["-march=armv8-a+crc"]]


def _build_scudo(spec, src, out, logf):
    cxx = _compiler("CXX", "c++")
    missing = [f for f in _SCUDO_SOURCES if not os.path.isfile(os.path.join(src, f))]
    if missing:
        raise _BuildError(f"{spec['subdir']}/ has no {', '.join(missing)}")
    cflags = _SCUDO_CFLAGS + ["-I", os.path.join(src, "include"), "-I", src]
    crc = _first_accepted(cxx, _SCUDO_CRC_FLAGS, "c++")
    jobs = [(cxx + cflags + (crc if f == "crc32_hw.cpp" else []), os.path.join(src, f))
            for f in _SCUDO_SOURCES]
    link = cxx + _SCUDO_LDFLAGS + ["-o", os.path.join(out, spec["lib"])]
    return _compile_and_link(jobs, link, [], out, logf)


# hardened_malloc's Makefile, which the crate leaves out: its sources, the config keys it
# turns into flags, and the flags. Every other key of config/<VARIANT>.mk becomes
# -D<key>=<value>, "CONFIG_" dropped but for _HM_KEEP_PREFIX. CONFIG_WERROR's -Werror is left
# out (as the crate does): a newer compiler's new warning must not cost the peer.
_HM_SOURCES = ["chacha.c", "h_malloc.c", "memory.c", "pages.c", "random.c", "util.c"]
_HM_MAKE_ONLY = {"CONFIG_WERROR", "CONFIG_NATIVE", "CONFIG_CXX_ALLOCATOR", "CONFIG_UBSAN"}
_HM_KEEP_PREFIX = {"CONFIG_SEAL_METADATA", "CONFIG_EXTENDED_SIZE_CLASSES",
                   "CONFIG_LARGE_SIZE_CLASSES", "CONFIG_CLASS_REGION_SIZE", "CONFIG_STATS",
                   "CONFIG_SELF_INIT", "CONFIG_LABEL_MEMORY"}
_HM_LDFLAGS = ["-Wl,-O1,--as-needed,-z,defs,-z,relro,-z,now,-z,nodlopen,-z,text"]
# The sources are C23 (alignas, static_assert as keywords); a compiler with only -std=c2x
# (GCC 12, Clang 14) gets them from <stdalign.h> and <assert.h>.
_C23_PROBE = ("struct roost_probe { alignas(64) char c; };\n"
              "static_assert(sizeof(struct roost_probe) == 64, \"alignas\");\n")
_C23_CHOICES = [["-std=c23"], ["-std=c2x"],
                ["-std=c2x", "-include", "stdalign.h", "-include", "assert.h"]]


def _hardened_malloc_config(path):
    """config/<VARIANT>.mk's `KEY := VALUE  # comment` lines as an ordered dict."""
    config = collections.OrderedDict()
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*(CONFIG_\w+)\s*:?=\s*([^#]*?)\s*(?:#.*)?$", line)
            if m:
                config[m.group(1)] = m.group(2)
    return config


def _build_hardened_malloc(spec, src, out, logf):
    variant = spec["options"][0].partition("=")[2]
    mk = os.path.join(src, "config", variant + ".mk")
    if not os.path.isfile(mk):
        raise _BuildError(f"{spec['subdir']}/config/{variant}.mk is not in the crate")
    missing = [f for f in _HM_SOURCES + ["new.cc"] if not os.path.isfile(os.path.join(src, f))]
    if missing:
        raise _BuildError(f"{spec['subdir']}/ has no {', '.join(missing)}")
    config = _hardened_malloc_config(mk)
    cc = _compiler("CC", "cc")
    std = _first_accepted(cc, _C23_CHOICES, "c", _C23_PROBE)
    if not std:
        raise _BuildError(f"{' '.join(cc)} compiles no C23 (alignas, static_assert)")
    cppflags = ["-D_GNU_SOURCE", "-I", os.path.join(src, "include")] + [
        f"-D{k if k in _HM_KEEP_PREFIX else k[len('CONFIG_'):]}={v}"
        for k, v in config.items() if k not in _HM_MAKE_ONLY]
    shared = (["-pipe", "-O3", "-flto", "-fPIC", "-fvisibility=hidden", "-fno-plt",
               "-fstack-clash-protection"] + _first_accepted(cc, [["-fcf-protection"]]) +
              ["-fstack-protector-strong", "-Wall", "-Wextra"] +
              _first_accepted(cc, [["-Wcast-align=strict"], ["-Wcast-align"]]) +
              ["-Wcast-qual", "-Wwrite-strings", "-Wundef"])
    if config.get("CONFIG_NATIVE") == "true":
        shared.append("-march=native")
    if config.get("CONFIG_UBSAN") == "true":
        shared += ["-fsanitize=undefined", "-fno-sanitize-recover=undefined"]
    cflags = std + shared + ["-Wmissing-prototypes", "-Wstrict-prototypes"]
    # The Makefile compiles new.cc with $(CC) too (CXX := $(CC)), for LTO's sake.
    cxxflags = ["-std=c++17", "-fsized-deallocation"] + shared
    jobs = [(cc + cflags + cppflags, os.path.join(src, f)) for f in _HM_SOURCES]
    ldlibs = []
    if config.get("CONFIG_CXX_ALLOCATOR", "true") == "true":
        jobs.append((cc + cxxflags + cppflags, os.path.join(src, "new.cc")))
        ldlibs.append("-lstdc++")
    link = cc + cflags + _HM_LDFLAGS + ["-shared", "-o", os.path.join(out, spec["lib"])]
    return _compile_and_link(jobs, link, ldlibs, out, logf)


_DIRECT_BUILDS = {"scudo": _build_scudo, "hardened_malloc": _build_hardened_malloc}


def _cached(build_root, name, spec):
    """The record of an earlier finished build of this peer, crate version and options."""
    crate = spec["crate"]
    try:
        entries = sorted(os.listdir(build_root))
    except OSError:
        return None
    for e in entries:
        if not e.startswith(name + "-"):
            continue
        rec_path = os.path.join(build_root, e, "peer.json")
        try:
            with open(rec_path) as f:
                rec = json.load(f)
        except (OSError, ValueError):
            continue
        if (rec.get("name") == name and rec.get("crate") == crate
                and rec.get("crate_version") == CRATES[crate]
                and rec.get("options") == spec["options"] and os.path.isfile(rec.get("lib", ""))):
            return rec
    return None


def _build_peer(name, spec, build_root, sources, install):
    rec = _cached(build_root, name, spec)
    if rec is not None:
        return {"lib": rec["lib"], "version": rec["version"], "source": rec["source"]}
    crate, crate_ver = spec["crate"], CRATES[spec["crate"]]
    if not install:
        return {"missing": f"not built under {build_root}, and --no-install was given"}
    direct = _DIRECT_BUILDS.get(spec.get("build"))
    if direct is None and shutil.which("cmake") is None:
        return {"missing": f"cmake not found (needed to build {name} from {crate} {crate_ver})"}
    crate_dir, reason = sources.get(crate)
    if crate_dir is None:
        return {"missing": reason}
    src = os.path.join(crate_dir, spec["subdir"])
    if direct is not None:
        if not os.path.isdir(src):
            return {"missing": f"{crate} {crate_ver} has no {spec['subdir']}/"}
    elif not os.path.isfile(os.path.join(src, "CMakeLists.txt")):
        return {"missing": f"{crate} {crate_ver} has no {spec['subdir']}/CMakeLists.txt"}
    if spec["version_from"] == "crate":
        version = crate_ver
    elif spec["version_from"] == "crate major":
        version = crate_ver.split(".")[0]
    else:
        version = _mimalloc_version(src)
        if version is None:
            return {"missing": f"no MI_MALLOC_VERSION in {src}/include/mimalloc.h"}
    out = os.path.join(build_root, f"{name}-{version}")
    os.makedirs(out, exist_ok=True)
    options = list(spec["options"])
    if spec["version_from"] == "mimalloc.h":
        options += _mimalloc_stand_ins(src, out, version)
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    logpath = os.path.join(out, "build.log")
    log(f"peers: building {name} {version} from {crate} {crate_ver} "
        f"(-j {nproc()}, log: {logpath})")
    t0 = time.monotonic()
    step, start = "CMake configure", 0
    with open(logpath, "w") as logf:
        if direct is not None:
            try:
                st, step, start = direct(spec, src, out, logf)
            except _BuildError as e:
                return {"missing": f"cannot build {name} from {crate} {crate_ver}: {e}"}
        else:
            st = _run_logged(["cmake", "-S", src, "-B", out] + gen +
                             ["-DCMAKE_BUILD_TYPE=Release", "-Wno-dev"] + options, logf)
            if st == 0:
                step, start = "CMake build", logf.tell()
                st = _run_logged(["cmake", "--build", out, "--target", spec["target"],
                                  "-j", str(nproc())], logf)
    secs = time.monotonic() - t0
    lib = os.path.join(out, spec["lib"])
    if st != 0 or not os.path.isfile(lib):
        tail = _file_tail(logpath)
        log(f"peers: building {name} failed; the end of {logpath}:")
        for line in tail:
            log("    " + line)
        with open(logpath, errors="replace") as f:
            f.seek(start)
            lines = [l.strip() for l in f.read().splitlines() if l.strip()]
        first_error = next((l for l in lines if re.search(r"CMake Error|\berror\b|FAILED:", l)),
                           lines[-1] if lines else "?")
        what = (f"{step} failed" if st != 0 else f"no {spec['lib']} after the build")
        return {"missing": f"{what} (log: {logpath}): {first_error}"}
    log(f"peers: built {name} {version} in {secs:.0f} s")
    note_written(out, f"{name} {version} built from {crate} {crate_ver}, kept for later runs")
    source = f"crates.io {crate} {crate_ver}"
    err = preload_check(lib)
    if err:
        return {"missing": f"{lib}: {err}"}
    try:  # the commit the crate was packaged from (for snmalloc-sys: snmalloc's own)
        with open(os.path.join(crate_dir, ".cargo_vcs_info.json")) as f:
            vcs = json.load(f).get("git", {}).get("sha1", "")
    except (OSError, ValueError):
        vcs = ""
    with open(os.path.join(out, "peer.json"), "w") as f:
        json.dump({"name": name, "lib": lib, "version": version, "source": source,
                   "crate": crate, "crate_version": crate_ver, "crate_dir": crate_dir,
                   "crate_vcs_sha1": vcs,
                   "options": spec["options"], "build_seconds": round(secs, 1),
                   "built": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, f, indent=1)
    return {"lib": lib, "version": version, "source": source}


# --- PyPI wheels -----------------------------------------------------------------------------


def _has_pip(py):
    return subprocess.run([py, "-m", "pip", "--version"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def _python_with_pip():
    """A python3 whose pip can download wheels (Debian's python3-pip installed if none has it).

    Returns (path, None) or (None, why)."""
    candidates = [sys.executable, "/usr/bin/python3"]
    for py in candidates:
        if os.path.exists(py) and _has_pip(py):
            return py, None
    why = Installer(True).install("python3-pip")
    if why is None and _has_pip("/usr/bin/python3"):
        return "/usr/bin/python3", None
    return None, f"no python3 with pip to download the wheel ({why or 'python3-pip has no pip'})"


def _pypi_peer(name, build_root, install):
    spec = PYPI[name]
    dist, version, member = spec["dist"], spec["version"], spec["member"]
    out = os.path.join(build_root, f"{name}-{version}")
    lib = os.path.join(out, os.path.basename(member))
    source = f"PyPI {dist} {version}"
    try:
        with open(os.path.join(out, "peer.json")) as f:
            rec = json.load(f)
        if rec.get("dist") == dist and rec.get("version") == version and os.path.isfile(lib):
            return {"lib": lib, "version": version, "source": source}
    except (OSError, ValueError):
        pass
    wheels = os.path.join(build_root, "pypi")
    os.makedirs(wheels, exist_ok=True)
    prefix = dist.replace("-", "_") + "-" + version + "-"
    found = [w for w in sorted(os.listdir(wheels)) if w.startswith(prefix) and w.endswith(".whl")]
    if not found:
        if not install:
            return {"missing": f"not downloaded under {build_root}, and --no-install was given"}
        py, why = _python_with_pip()
        if py is None:
            return {"missing": why}
        logpath = os.path.join(wheels, f"{dist}-{version}.log")
        log(f"peers: downloading {dist} {version} from PyPI with pip (log: {logpath})")
        with open(logpath, "w") as logf:
            st = _run_logged([py, "-m", "pip", "download", "--no-deps",
                              "--only-binary=:all:", "--disable-pip-version-check",
                              "--retries", "1", "--timeout", "30", "--dest", wheels,
                              f"{dist}=={version}"], logf)
        found = [w for w in sorted(os.listdir(wheels))
                 if w.startswith(prefix) and w.endswith(".whl")]
        if st != 0 or not found:
            return {"missing": f"`pip download {dist}=={version}` failed (log: {logpath}): "
                               f"{' '.join(_file_tail(logpath, 1)).strip() or '?'}"}
    wheel = os.path.join(wheels, found[-1])
    import zipfile
    try:
        with zipfile.ZipFile(wheel) as z:
            data = z.read(member)
    except (OSError, KeyError, zipfile.BadZipFile) as e:
        return {"missing": f"{wheel}: no {member} ({e})"}
    os.makedirs(out, exist_ok=True)
    with open(lib + ".tmp", "wb") as f:
        f.write(data)
    os.chmod(lib + ".tmp", 0o755)
    os.replace(lib + ".tmp", lib)
    err = preload_check(lib)
    if err:
        return {"missing": f"{lib}: {err}"}
    note_written(out, f"{name} {version} taken from {os.path.basename(wheel)}, kept for later runs")
    with open(os.path.join(out, "peer.json"), "w") as f:
        json.dump({"name": name, "lib": lib, "version": version, "source": source,
                   "dist": dist, "wheel": os.path.basename(wheel), "member": member,
                   "installed": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, f, indent=1)
    return {"lib": lib, "version": version, "source": source}


@contextlib.contextmanager
def _locked(build_root):
    """Serializes concurrent callers on one build root (the second waits for the first)."""
    try:
        f = open(os.path.join(build_root, ".lock"), "w")
    except OSError:
        yield
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure_peers(build_root=DEFAULT_BUILD_ROOT, names=None, install=True):
    """Makes the peer allocators available; returns an ordered dict in PEER_NAMES order.

    Each value is {"lib": absolute path, "version": allocator version, "source":
    "debian <package> <package version>", "PyPI <distribution> <version>" or
    "crates.io <crate> <crate version>"},
    or {"missing": reason}. `build_root` (relative: to the repository root) caches
    the built peers. With install=False nothing is installed, downloaded or built:
    only what is already there is offered. `names` picks peers (default:
    DEFAULT_PEERS, all but the opt-in ones); unknown names raise ValueError.
    Every offered library passed preload_check().
    """
    if names is None:
        names = DEFAULT_PEERS
    names = list(names)
    bad = [n for n in names if n not in PEER_NAMES]
    if bad:
        raise ValueError(f"unknown peer(s) {', '.join(bad)}; known: {', '.join(PEER_NAMES)}")
    if not os.path.isabs(build_root):
        build_root = os.path.join(REPO, build_root)
    build_root = os.path.abspath(build_root)
    try:
        os.makedirs(build_root, exist_ok=True)
    except OSError:
        pass  # the built peers will say why they are missing; the Debian ones still work
    result = collections.OrderedDict()
    installer = Installer(install)
    sources = CrateSources(build_root)
    with _locked(build_root):
        for name in PEER_NAMES:
            if name not in names:
                continue
            try:
                if name in DEBIAN:
                    r = _debian_peer(name, installer)
                elif name in PYPI:
                    r = _pypi_peer(name, build_root, install)
                else:
                    r = _build_peer(name, BUILT[name], build_root, sources, install)
                if "lib" in r:
                    err = preload_check(r["lib"])
                    if err:
                        r = {"missing": f"{r['lib']}: {err}"}
            except Exception as e:  # one peer's failure must not cost the others
                r = {"missing": f"{type(e).__name__}: {e}"}
            result[name] = r
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-root", default=DEFAULT_BUILD_ROOT,
                    help="where built peers are cached (default: build/peers in the repository)")
    ap.add_argument("--no-install", action="store_true",
                    help="never apt-get install, fetch or build: report what is already there")
    ap.add_argument("--only", default="",
                    help=f"comma-separated peers among {','.join(PEER_NAMES)} (default: all "
                    f"but the opt-in {','.join(OPT_IN_PEERS)})")
    opts = ap.parse_args()
    names = parse_list(opts.only) or None
    try:
        t0 = time.monotonic()
        peers = ensure_peers(os.path.abspath(opts.build_root) if opts.build_root !=
                             DEFAULT_BUILD_ROOT else DEFAULT_BUILD_ROOT, names,
                             not opts.no_install)
    except ValueError as e:
        ap.error(str(e))
    print(json.dumps(peers, indent=1))
    for name, p in peers.items():
        if "missing" in p:
            print(f"{name:21} MISSING: {p['missing']}", file=sys.stderr)
        else:
            print(f"{name:21} {p['version']:10} {p['lib']}  ({p['source']})", file=sys.stderr)
    print(f"peers: {time.monotonic() - t0:.1f} s", file=sys.stderr)
    return 1 if any("missing" in p for p in peers.values()) else 0
