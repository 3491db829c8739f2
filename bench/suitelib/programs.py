"""Real programs as workloads: CPython, g++, the SQLite shell, Perl, RocksDB's db_bench (a
multithreaded LSM key-value store with its own benchmark driver) and the Redis server driven by
its own benchmark client, each run as its users run it, as a whole process under the
allocator's LD_PRELOAD, which reaches every process it starts (g++ runs cc1plus and as).

Each run gets its input from program_inputs.py (generated, seeded, in a temporary folder, the
same for every allocator), a fresh working folder, and its output checked there: a run whose
output is wrong is an error, not a figure. The figure is runs per second (1 / the whole run's
wall time: higher is better, as every figure of the suite), the time that wall time, and the
peak RSS the run's ru_maxrss from wait4, which covers the processes it waited for: the largest
single process of the tree (g++: cc1plus), not their sum.

The check run (tiny input) also runs under LD_DEBUG=files,bindings: every process of the tree
must bind `malloc` to the allocator's library (glibc: libc.so.6), and the processes it saw are
what the report names as the tree measured. The programs come from Debian's packages, installed
when missing unless --no-install (then the workload shows as not available)."""

import functools
import os
import re
import shutil
import subprocess
import tempfile

from . import measure, program_inputs as inputs
from .common import Installer
from .workloads import Workload, arg_value, parse_count

# Where a program's run folder and inputs go: a tmpfs with room to spare when there is one, so
# that the KV store's files and the compiler's temporaries cost no disk I/O on a shared machine.
TMP_ROOTS = ("/dev/shm",)
TMP_ROOM = 1 << 30
# Environment of every program run (on top of the suite's scrubbed one): the same hash seeds
# and locale in every run, so every allocator sees the same work.
PROGRAM_ENV = {"LC_ALL": "C", "PYTHONHASHSEED": "0", "PERL_HASH_SEED": "0",
               "PERL_PERTURB_KEYS": "0"}
# Dropped so that the programs run as installed (no user paths, startup files or options).
DROP_PREFIXES = ("PYTHON", "PERL5", "PERLLIB", "GCC_", "COMPILER_PATH", "CPATH",
                 "LIBRARY_PATH", "SQLITE")


class Program(Workload):
    """A workload that is a program of a Debian package: `path` (absolute, as the package
    installs it) from `package`; `make(n, seed, folder, **opts)` writes its input and returns
    (arguments, check); args: the suite's parameters (-n the amount of work, -t threads
    where the program takes them), scaled like any workload's; tiny: -n of the check run;
    reference: the output's facts must equal a run's under the system allocator; runner: the
    program that runs the command (a shell, for a script that make() wrote and that starts
    `path` and its companions), when it is not `path` itself; system_libc: `path` links another
    allocator (Debian's redis-server links jemalloc), so the system allocator's runs preload
    the libc it links, and glibc's malloc serves them."""

    kind = "program"

    def __init__(self, key, label, path, package, make, args, tiny, sets=("full",),
                 threads=None, reference=False, stresses="", runner=None, system_libc=False):
        super().__init__(key, label, os.path.basename(path), args, "runs_per_sec", "-n",
                         threads=threads, sets=sets, sweep=False, stresses=stresses)
        self.path, self.package, self.make = path, package, make
        self.tiny, self.reference = tiny, reference
        self.runner, self.system_libc = runner, system_libc
        self.processes = []  # the tree the check runs saw, in order of first appearance
        self._prepared = {}

    @property
    def binary_name(self):
        return self.program

    def available(self):
        return os.access(self.path, os.X_OK) and (self.runner is None
                                                   or os.access(self.runner, os.X_OK))

    def argv(self, spec):
        return [self.runner or self.path] + spec["argv"]

    def command(self, args):
        """The command as the report shows it, with its input folder as `IN/`."""
        spec = self.prepare(args)
        return " ".join(a.replace(spec["folder"] + "/", "IN/") for a in self.argv(spec))

    def prepare(self, args):
        """The input of one configuration (made once): {folder, argv, check, facts}."""
        key = tuple(args)
        if key not in self._prepared:
            n = parse_count(arg_value(args, "-n"))
            opts = {"program": self.path}
            if "-t" in args:
                opts["threads"] = int(arg_value(args, "-t"))
            folder = tempfile.mkdtemp(prefix=f"roost-suite-{self.key}-", dir=tmp_root())
            argv, check = self.make(n, inputs.SEED, folder, **opts)
            self._prepared[key] = {"folder": folder, "argv": argv, "check": check,
                                   "facts": None}
        return self._prepared[key]

    def run(self, args, alloc, timeout, check=False):
        """One run (measure.run_case); the check run also notes the process tree."""
        res = run_program(self, args, alloc, timeout, check_preload=check)
        for prog in res.get("processes", []):
            if prog not in self.processes:
                self.processes.append(prog)
        return res

    def cleanup(self):
        for spec in self._prepared.values():
            shutil.rmtree(spec["folder"], ignore_errors=True)
        self._prepared.clear()


def tmp_root():
    for d in TMP_ROOTS:
        try:
            st = os.statvfs(d)
        except OSError:
            continue
        if os.access(d, os.W_OK) and st.f_bavail * st.f_frsize >= TMP_ROOM:
            return d
    return None  # the system's temporary folder


def program_env(alloc, run_dir):
    env = {k: v for k, v in measure.run_env(None, alloc.env).items()
           if not k.startswith(DROP_PREFIXES)}
    env.update(PROGRAM_ENV)
    env["TMPDIR"] = run_dir
    env.update(alloc.env)  # a variant's own settings win
    return env


# LD_DEBUG's lines: "PID: initialize program: PATH" and "PID: binding file A [0] to B [0]:
# normal symbol `malloc' [...]".
INIT_RE = re.compile(r"^\s*\d+:\s+initialize program: (.*)$", re.M)
MALLOC_RE = re.compile(r"^\s*\d+:\s+binding file .* to (\S+) \[\d+\]: normal symbol `malloc'",
                       re.M)


def bindings(debug_dir):
    """[(program, {objects its malloc bound to})] for every process LD_DEBUG wrote about.
    A binding to the program itself is left out: an executable that takes malloc's address
    has a canonical PLT entry, which the libraries bind to and which binds on in turn."""
    out = []
    names = sorted(os.listdir(debug_dir), key=lambda n: int(n.rpartition(".")[2] or 0))
    for name in names:
        with open(os.path.join(debug_dir, name), errors="replace") as f:
            text = f.read()
        m = INIT_RE.search(text)
        prog = m.group(1).strip() if m else "?"
        objs = {o for o in MALLOC_RE.findall(text)
                if o != prog and os.path.basename(o) != os.path.basename(prog)}
        out.append((prog, objs))
    return out


def preload_reason(procs, lib):
    """None when every process that bound malloc bound it to lib (None: libc.so), and the
    first process did; else what is wrong."""
    if not procs:
        return "LD_DEBUG saw no process"
    for prog, objs in procs:
        wrong = [o for o in objs if not measure.provider_ok(lib, o)]
        if wrong:
            return f"{os.path.basename(prog)} took malloc from {', '.join(sorted(wrong))}"
    if not procs[0][1]:
        return f"{os.path.basename(procs[0][0])} never bound malloc"
    return None


class _System:
    """The reference runs' allocator: the system's, no preload, no extra environment."""
    name, lib, env = "system", None, {}


SYSTEM = _System()


def run_program(wl, args, alloc, timeout, check_preload=False, reference=False):
    """One run of a Program under alloc, in a fresh folder; returns measure.run_once's dict
    (plus command and processes). check_preload: run under LD_DEBUG and check the tree;
    reference: this is the reference run (its facts are not compared)."""
    spec = wl.prepare(args)
    if wl.reference and spec["facts"] is None and not check_preload and not reference:
        ref = run_program(wl, args, SYSTEM, timeout, reference=True)
        if not ref["ok"]:
            return dict(ref, reason=f"the reference run (no preload) failed: {ref['reason']}")
        spec["facts"] = ref["facts"]
    run_dir = tempfile.mkdtemp(prefix="run-", dir=spec["folder"])
    debug_dir = tempfile.mkdtemp(prefix="roost-suite-ld-") if check_preload else None
    try:
        p = measure.run_process(wl.argv(spec), preload_lib(wl, alloc),
                                program_env(alloc, run_dir),
                                timeout, cwd=run_dir,
                                debug=os.path.join(debug_dir, "ld") if debug_dir else None)
        res = {"ok": False, "reason": None, "maxrss_kib": p["maxrss_kib"],
               "wall_s": p["wall_s"], "cpu_s": p["cpu_s"], "sys_s": p["sys_s"], "exit": p["exit"],
               "facts": {},
               "command": wl.command(args), "processes": []}
        provider = ""
        reason = measure.exit_reason(p, timeout)
        if reason is None:
            reason, res["facts"] = spec["check"](p["stdout"], run_dir)
        if reason is None and wl.reference and spec["facts"] is not None \
                and res["facts"] != spec["facts"]:
            reason = f"{wl.program} counted {res['facts']}, the reference run {spec['facts']}"
        if reason is None and debug_dir:
            procs = bindings(debug_dir)
            res["processes"] = [prog for prog, _ in procs]
            why = preload_reason(procs, alloc.lib)
            if why:
                reason = f"preload not in effect: {why}"
                res["preload_failed"] = True
            else:
                provider = sorted(procs[0][1])[0]
        res["reason"] = reason
        res["ok"] = reason is None
        res["report"] = {"seconds": f"{p['wall_s']:.6f}", wl.field: f"{1 / p['wall_s']:.6f}",
                         "malloc_from": provider} if res["ok"] else {}
        return res
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
        if debug_dir:
            shutil.rmtree(debug_dir, ignore_errors=True)


@functools.lru_cache(maxsize=None)
def linked_libc(path):
    """The libc.so that the program `path` links (ldd's path), or None."""
    r = subprocess.run(["ldd", path], capture_output=True, text=True)
    m = re.search(r"^\s*libc\.so\.\d+ => (\S+)", r.stdout, re.M)
    return m.group(1) if m else None


def preload_lib(wl, alloc):
    """The library a run of the program `wl` under `alloc` preloads (None: none): the
    allocator's, or for the system allocator the libc the program links where it links
    another allocator (Program's system_libc)."""
    return alloc.lib or (linked_libc(wl.path) if wl.system_libc else None)


def tree_text(wl):
    """'g++ → cc1plus, as' (or the program alone) from what the check runs saw."""
    names = [os.path.basename(p) for p in wl.processes] or [os.path.basename(wl.path)]
    return names[0] + (" → " + ", ".join(names[1:]) if len(names) > 1 else "")


def ensure_available(workloads, install):
    """{key: why} for the Program workloads whose program is missing, after installing the
    Debian packages that provide them (as root, unless install is False)."""
    installer = Installer(install)
    missing, tried = {}, {}
    for w in workloads:
        if getattr(w, "kind", "") != "program" or w.available():
            continue
        if w.package not in tried:
            tried[w.package] = installer.install(w.package)
        if not w.available():
            why = tried[w.package] or f"the package did not install {w.path}"
            missing[w.key] = f"{w.path} is missing (Debian package {w.package}): {why}"
    return missing


# ----------------------------------------------------------------------------------------------
# The table. Work amounts aim at one to three seconds per run on an idle 2-core machine, about
# one for the two of the default set.

PROGRAMS = [
    Program("python-json", "CPython: a JSON document of 20k records built, serialized, parsed "
            "and summarized", "/usr/bin/python3", "python3", inputs.make_python_json,
            ["-n", "20000"], tiny=300, sets=("default", "full"),
            stresses="an interpreter's heap: dicts, lists and strings by the million (pymalloc "
                     "for the small ones, as CPython runs by default), megabytes of JSON text"),
    Program("gxx-templates", "g++ -O2 -c of a generated template-heavy C++ file, 4 record "
            "types", "/usr/bin/g++", "g++", inputs.make_gxx, ["-n", "4"], tiny=1,
            stresses="a compiler: GCC's garbage-collected heap, obstacks and trees; three "
                     "processes (driver, cc1plus, as)"),
    Program("sqlite-shell", "SQLite shell: 150k INSERT statements, two indexes, queries, a "
            "delete", "/usr/bin/sqlite3", "sqlite3", inputs.make_sqlite, ["-n", "150000"],
            tiny=500,
            stresses="a statement parsed, prepared and freed per row; a 64 MiB page cache"),
    Program("perl-words", "Perl: word and bigram counts of a generated text in hashes",
            "/usr/bin/perl", "perl-base", inputs.make_perl, ["-n", "60000"], tiny=500,
            stresses="hash entries, strings and arrays grown one element at a time"),
    Program("kvstore", "RocksDB db_bench: 60k random keys written, read and scanned by each "
            "thread", "/usr/bin/db_bench",
            "rocksdb-tools", inputs.make_kvstore, ["-t", "2", "-n", "60000"], tiny=2000,
            threads="t", sets=("default", "full"), reference=True,
            stresses="an LSM store: memtable, flushes and compactions on background threads, "
                     "block cache; 1 MiB write buffers"),
    Program("redis", "Redis: 200k pipelined LPUSH, LPOP, SET and GET requests each from its "
            "benchmark client over a Unix socket", "/usr/bin/redis-server", "redis-server",
            inputs.make_redis, ["-n", "200000"], tiny=2000, runner="/bin/sh",
            system_libc=True,
            stresses="a server that asks malloc_usable_size at every malloc and free to count "
                     "its memory; a list grown and emptied, a keyspace of short strings; the "
                     "client under the same allocator"),
]

# --self-test's real program: a tiny CPython run (python3 is there wherever the suite runs).
SELF_TEST_PROGRAMS = [
    Program("python-json", "CPython JSON (tiny)", "/usr/bin/python3", "python3",
            inputs.make_python_json, ["-n", "300"], tiny=100),
]


def self_test():
    """The LD_DEBUG reading and the checks on made-up cases, and a run whose output is wrong
    (when python3 is there); returns what failed (empty: ok)."""
    failed = list(inputs.self_test())
    lib = "/opt/x/liballoc.so"
    sample = {
        "ld.100": "   100:\tinitialize program: /usr/bin/tool\n"
                  "   100:\tbinding file /lib/libc.so.6 [0] to /usr/bin/tool [0]: normal symbol "
                  "`malloc' [GLIBC_2.2.5]\n"
                  f"   100:\tbinding file /usr/bin/tool [0] to {lib} [0]: normal symbol "
                  "`malloc' [GLIBC_2.2.5]\n",
        "ld.101": "   101:\tinitialize program: as\n"
                  "   101:\tbinding file /lib/libz.so.1 [0] to /lib/libc.so.6 [0]: normal symbol "
                  "`malloc' [GLIBC_2.2.5]\n"}
    with tempfile.TemporaryDirectory(prefix="roost-programs-") as d:
        for name, text in sample.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        procs = bindings(d)
    if procs != [("/usr/bin/tool", {lib}), ("as", {"/lib/libc.so.6"})]:
        failed.append(f"LD_DEBUG reading: {procs}")
    if preload_reason(procs[:1], lib) is not None:
        failed.append("the program's own canonical PLT entry was taken for its malloc")
    if "as took malloc from /lib/libc.so.6" not in (preload_reason(procs, lib) or ""):
        failed.append("a child that bound libc's malloc under a preload passed")
    if preload_reason([("/usr/bin/tool", {"/lib/x86_64-linux-gnu/libc.so.6"})], None):
        failed.append("glibc's malloc under no preload did not pass")
    wl = SELF_TEST_PROGRAMS[0]
    if wl.available():
        def wrong(n, seed, folder, **opts):
            argv, _ = inputs.make_python_json(n, seed, folder, **opts)
            return argv, inputs.same_text("records 0\n", "summary")
        bad = Program("wrong", "a check that cannot pass", wl.path, wl.package, wrong,
                      ["-n", "20"], tiny=20)
        try:
            r = run_program(bad, bad.args, SYSTEM, 60)
        finally:
            bad.cleanup()
        if r["ok"] or "wrong summary" not in (r["reason"] or ""):
            failed.append(f"a run with the wrong output was not an error: {r['reason']}")
    return failed
