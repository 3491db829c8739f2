"""The workload table: every program of the suite with its base command line, figure and
thread parameter; and the cases made from it (a workload at one thread count, its work
scaled)."""

import fnmatch
import re

# Units of the figure fields: field -> what one unit of work is.
UNITS = {"objects_per_sec": "objects/s", "msgs_per_sec": "msgs/s", "ops_per_sec": "ops/s",
         "writes_per_sec": "writes/s", "steps_per_sec": "steps/s", "runs_per_sec": "runs/s",
         "mib_per_sec": "MiB/s"}

DEFAULT_THREADS_FULL = [1, 2, 4, 8, 16]
# In a thread sweep every case does this fraction of the base configuration's
# total work (the same at every thread count), so that a sweep of five counts
# costs about 2.5 base runs.
SWEEP_WORK = 0.5


class Workload:
    """One entry of the workload table.

    args: the base command line (flags of spec.md). field: the figure in the
    report line (higher is better). work: the flag whose value is the amount of
    work per thread (scaled by --scale; in a sweep, scaled so that every count
    does SWEEP_WORK x the base configuration's total work). threads: "t" (-t N
    threads), "pc" (-p N -c N: N producer/consumer pairs) or None (no thread
    parameter). sets: "default" and/or "full". sweep: swept when thread counts
    are given (--full, --threads); a workload with a thread parameter but
    sweep=False is swept only when named in --workloads. min_threads: the
    smallest count the program takes. live: a field of the report with the
    program's peak live KiB (frag), or the bound it keeps its memory within
    (sharedcache's budget), shown next to the peak RSS; live_label: what that
    field is, in the table's heading ("peak live", "budget"). cpu: the tables
    also show the run's CPU and system time. stresses: one line for the tables. tiny: the
    work amount of the check run (default: tiny_args()'s rule).
    """

    def __init__(self, key, label, program, args, field, work, threads=None, sets=("full",),
                 sweep=None, min_threads=1, live=None, live_label="peak live", cpu=False,
                 stresses="", tiny=None):
        self.key, self.label, self.program = key, label, program
        self.tiny = tiny
        self.args, self.field, self.work, self.threads = list(args), field, work, threads
        self.sets = sets
        self.sweep = (threads is not None) if sweep is None else sweep
        self.min_threads, self.live, self.stresses = min_threads, live, stresses
        self.live_label, self.cpu = live_label, cpu

    @property
    def binary_name(self):
        return "bench_" + self.program

    def base_threads(self):
        if self.threads == "t":
            return int(arg_value(self.args, "-t"))
        if self.threads == "pc":
            return int(arg_value(self.args, "-p"))
        return None


def arg_value(args, flag):
    i = args.index(flag)
    return args[i + 1]


def set_arg(args, flag, value):
    args = list(args)
    if flag in args:
        args[args.index(flag) + 1] = str(value)
    else:
        args += [flag, str(value)]
    return args


def parse_count(s):
    """A count with an optional k/m suffix (the programs' BenchParseU64)."""
    m = re.fullmatch(r"(\d+)([kKmM]?)", s)
    if not m:
        raise ValueError(s)
    return int(m.group(1)) * {"": 1, "k": 1000, "K": 1000, "m": 10**6, "M": 10**6}[m.group(2)]


def thread_desc(args):
    if "-p" in args and "-c" in args:
        return f"{arg_value(args, '-p')}P/{arg_value(args, '-c')}C"
    if "-t" in args:
        t = arg_value(args, "-t")
        return f"{t} thread" + ("" if t == "1" else "s")
    return ""


R = "random 16..2048 B"
# The table: every program of the suite. Work amounts aim at about one second
# per run for a typical allocator on 2 cores.
WORKLOADS = [
    # --- message passing: every free is remote ---------------------------------------------
    Workload("prodcons", f"prodcons, {R}, batches of 256", "prodcons",
             ["-p", "2", "-c", "2", "-n", "2500000"], "objects_per_sec", "-n", threads="pc",
             sets=("default", "full"),
             stresses="producers only allocate, consumers only free (bounded queue)"),
    Workload("prodcons-1p3c", f"prodcons, {R}, batches of 256", "prodcons",
             ["-p", "1", "-c", "3", "-n", "3000000"], "objects_per_sec", "-n",
             stresses="one producer feeding three consumers"),
    Workload("prodcons-3p1c", f"prodcons, {R}, batches of 256", "prodcons",
             ["-p", "3", "-c", "1", "-n", "1000000"], "objects_per_sec", "-n",
             stresses="three producers, one consumer frees for all"),
    Workload("prodcons-64", "prodcons, fixed 64 B, batches of 256", "prodcons",
             ["-p", "1", "-c", "1", "-n", "5000000", "-s", "64", "-S", "64"],
             "objects_per_sec", "-n", stresses="one size class only"),
    Workload("prodcons-b1", f"prodcons, {R}, batch 1 (no batching)", "prodcons",
             ["-p", "1", "-c", "1", "-n", "500000", "-b", "1", "-q", "4096"],
             "objects_per_sec", "-n", stresses="hand-off of single objects"),
    Workload("msgpass", "msgpass (BatchIt §4.3), 4 sizes, batches of 1..16, 4096 in flight",
             "msgpass",
             ["-p", "1", "-c", "1", "-n", "4000000"], "msgs_per_sec", "-n", threads="pc",
             sets=("default", "full"),
             stresses="batches of one size sent to random consumers, bounded in flight"),
    # Fixed thread placement (bench/msgpass.c -a): with more threads than
    # cores, who shares a core is otherwise the kernel's choice, run by run.
    Workload("msgpass-paired", "msgpass 2P/2C, producer i and consumer i share a CPU", "msgpass",
             ["-p", "2", "-c", "2", "-n", "2500000", "-a", "1"], "msgs_per_sec", "-n",
             stresses="each core runs one producer and one consumer"),
    Workload("msgpass-split", "msgpass 2P/2C, producers and consumers on separate CPUs",
             "msgpass", ["-p", "2", "-c", "2", "-n", "1500000", "-a", "2"], "msgs_per_sec", "-n",
             stresses="producers share their cores, consumers theirs (pipeline stages pinned)"),
    Workload("xmalloc", "xmalloc, random 16..2048 B, blocks of 64, unbounded", "xmalloc",
             ["-p", "2", "-c", "2", "-n", "1000000"], "objects_per_sec", "-n", threads="pc",
             sets=("default", "full"),
             stresses="producer/consumer with no back-pressure: memory in flight grows"),
    Workload("symmetric", f"symmetric swap, {R}, batches of 256", "symmetric",
             ["-t", "4", "-r", "6000"], "ops_per_sec", "-r", threads="t", min_threads=2,
             sets=("default", "full"),
             stresses="threads swap what they allocate: remote frees a thread cache can reuse"),
    Workload("symmetric-64", "symmetric swap, fixed 64 B, batches of 256", "symmetric",
             ["-t", "4", "-r", "6000", "-s", "64", "-S", "64"], "ops_per_sec", "-r",
             stresses="one size class only"),
    Workload("symmetric-b1", f"symmetric swap, {R}, batch 1", "symmetric",
             ["-t", "4", "-r", "100000", "-b", "1"], "ops_per_sec", "-r",
             stresses="exchange of single objects"),
    Workload("sharedcache", "shared cache: LRU hash map in 16 locked shards, 64 MiB budget, "
             "values 1..4 KiB", "sharedcache", ["-t", "4", "-n", "250000"], "ops_per_sec", "-n",
             threads="t", min_threads=2, sets=("default", "full"), live="budget_kib",
             live_label="budget", cpu=True,
             stresses="any thread evicts what another inserted: KiB values freed remotely, "
                      "peak RSS against the cache's budget"),
    # --- classic multithreaded allocator benchmarks -------------------------------------------
    Workload("larson", "larson server simulation, 16..1024 B", "larson",
             ["-t", "4", "-g", "20", "-n", "150000"], "ops_per_sec", "-n", threads="t",
             sets=("default", "full"),
             stresses="objects freed by threads that did not allocate them, long-lived slots"),
    Workload("larson-sized", "larson, 16..1024 B, operator new and sized delete", "larson",
             ["-t", "4", "-g", "20", "-n", "150000", "-z", "1"], "ops_per_sec", "-n",
             stresses="larson through C++'s sized delete: as cheap as plain free?"),
    Workload("threadtest", "threadtest, 64 B", "threadtest",
             ["-t", "4", "-i", "500", "-n", "10000"], "ops_per_sec", "-i", threads="t",
             sets=("default", "full"), stresses="thread-local allocate-all then free-all"),
    Workload("linuxscal", "linux-scalability, 64 B", "linuxscal",
             ["-t", "4", "-n", "8000000"], "ops_per_sec", "-n", threads="t",
             stresses="thread-local immediate malloc/free pairs"),
    Workload("cachescratch", "cache-scratch (passive false sharing), 8 B", "cachescratch",
             ["-t", "4", "-i", "100000", "-w", "400"], "writes_per_sec", "-i", threads="t",
             stresses="objects handed out by one thread, freed and reused by others"),
    Workload("cachethrash", "cache-thrash (active false sharing), 8 B", "cachethrash",
             ["-t", "4", "-i", "100000", "-w", "400"], "writes_per_sec", "-i", threads="t",
             stresses="small objects of different threads on one cache line"),
    Workload("mstress", "mstress-style: 4 threads a round, random sizes, objects cross rounds",
             "mstress", ["-t", "4", "-r", "100", "-n", "20000", "-l", "20000"], "ops_per_sec", "-r",
             threads="t", sets=("default", "full"),
             stresses="thread generations: objects freed after their allocating thread exited"),
    Workload("threadleak", "thread churn: 10 short threads a round, each leaving an object behind",
             "mstress", ["-t", "10", "-r", "1000", "-n", "2", "-l", "1", "-x", "1000", "-e", "1"],
             "ops_per_sec", "-r", threads="t", sweep=False,
             stresses="a small process's footprint when every thread leaves an object for later"),
    Workload("churn", "thread churn: 32 threads a round, zeroed objects handed through a shared array",
             "churn", ["-t", "32", "-r", "4", "-s", "50"], "ops_per_sec", "-r", threads="t",
             sweep=False, sets=("default", "full"),
             stresses="thread starts and exits under load, calloc, now and then an object of MBs"),
    Workload("mixed", "mixed sizes, mostly thread-local: 4 long-lived threads, 1 % swapped",
             "mstress", ["-t", "4", "-r", "1", "-n", "3000000", "-l", "100000", "-e", "100",
                         "-w", "0"], "ops_per_sec", "-n", threads="t",
             stresses="random sizes 8 B..5 MB, a large working set, few remote frees"),
    Workload("gcstress", "interpreter GC stress: 2 threads under one lock, mark and sweep",
             "gcstress", ["-t", "2", "-n", "1000000"], "ops_per_sec", "-n", threads="t",
             sweep=False, sets=("default", "full"),
             stresses="sweeps free bodies both threads made; 64 KiB heap pages come and go"),
    # --- single-thread-ish: memory shape ------------------------------------------------------
    Workload("frag", "fragmentation (phases, random lifetimes), 64 MiB live", "frag",
             ["-t", "1", "-n", "3000000"], "ops_per_sec", "-n", threads="t", sweep=False,
             live="peak_live_kib", sets=("default", "full"),
             stresses="shifting size distributions; peak RSS against peak live bytes"),
    Workload("slowleak", "slow leak with churn: 1 in 1000 dying objects kept, 16 B..64 KiB",
             "slowleak", ["-t", "1", "-n", "10000000"], "ops_per_sec", "-n", threads="t",
             sweep=False, live="peak_live_kib", sets=("default", "full"),
             stresses="leaked objects scattered among short-lived ones; RSS against live bytes"),
    Workload("realloc", "realloc-heavy (growing and shrinking buffers)", "realloc",
             ["-t", "2", "-n", "800000"], "ops_per_sec", "-n", threads="t", sweep=False,
             sets=("default", "full"), stresses="in-place growth, copies, size-class moves"),
    Workload("cachepollute", "cache pollution: LLC-sized walk between malloc/free, 1 thread",
             "cachepollute", ["-n", "500000"], "steps_per_sec", "-n",
             stresses="the program's own work rate; the allocator's cache footprint evicts it"),
    Workload("bursts", "bursts of same-size objects, 16 B..4 KiB x 25..1600, 1 thread", "bursts",
             ["-n", "200"], "ops_per_sec", "-n",
             stresses="refills and slab turnover: a burst of one size allocated, then freed"),
    Workload("smallheap", "a small program's heap: 5000 objects of 16..1015 B, half replaced a round",
             "smallheap", ["-n", "5000", "-r", "20"], "ops_per_sec", "-r", live="peak_live_kib",
             stresses="what the allocator maps and touches beside a heap of a few MiB (peak RSS)"),
    Workload("sqlite", "SQLite in memory: 200k rows inserted, indexed, grouped, a third deleted",
             "sqlite", ["-n", "200000"], "rows_per_sec", "-n",
             stresses="a real library: statements, 4 KiB pages of its cache, b-tree cells, sorts"),
    Workload("large", "large objects, 1..64 MiB", "large",
             ["-t", "2", "-n", "1200"], "ops_per_sec", "-n", threads="t", sweep=False,
             sets=("default", "full"), stresses="mmap/munmap, page faults, large-object caches"),
    Workload("largebuf", "large buffers, 5..25 MB, twenty live, zeroed, replaced at random",
             "large", ["-t", "1", "-n", "800", "-s", "5m", "-S", "25m", "-k", "20", "-z", "1",
                       "-r", "1", "-a", "1"], "ops_per_sec", "-n", sweep=False, sets=("default", "full"),
             stresses="freed buffers reused without faulting them in again"),
    # Huge pages (issue 58): what the TLB gains (no hardware counters here: the chase's time
    # is the proxy) and what a start-up that faults in a big heap pays (bench/stalls.py runs
    # it many times for the slowest runs).
    Workload("tlbwalk", "pointer chase through 256 MiB of 64..256 B objects in random order",
             "tlbwalk", ["-m", "256", "-n", "4"], "steps_per_sec", "-n", tiny=1,
             stresses="page walks: a TLB entry per 4 KiB page of the heap, or per 2 MiB one"),
    Workload("bigstart", "start-up: 200 MiB at once (4 buffers of 32 MiB, small objects), exit",
             "bigstart", ["-m", "200"], "mib_per_sec", "-m", tiny=200,
             stresses="faulting a fresh heap in; huge pages assembled on the program's thread"),
]

# The table of --self-test: two tiny workloads and one whose program is never built.
SELF_TEST_WORKLOADS = [
    Workload("prodcons", "prodcons (tiny)", "prodcons",
             ["-p", "1", "-c", "1", "-n", "20000", "-b", "64", "-q", "8"],
             "objects_per_sec", "-n", threads="pc"),
    Workload("symmetric", "symmetric (tiny)", "symmetric", ["-t", "2", "-r", "50", "-b", "64"],
             "ops_per_sec", "-r", threads="t", min_threads=2),
    Workload("absent", "a program that is never built", "selftest_absent", ["-n", "1"],
             "ops_per_sec", "-n"),
]


def select_workloads(table, patterns, full):
    """The workloads named by patterns (shell patterns, in order), or with patterns None the
    default or full set. Raises ValueError(pattern) for a pattern that matches nothing."""
    if patterns is not None:
        chosen = []
        for pat in patterns:
            hits = [w for w in table if fnmatch.fnmatchcase(w.key, pat)]
            if not hits:
                raise ValueError(pat)
            chosen += [w for w in hits if w not in chosen]
        return chosen
    want = "full" if full else "default"
    return [w for w in table if want in w.sets]


# ----------------------------------------------------------------------------------------------
# Cases: a workload at one thread count with its final command line.

class Case:
    def __init__(self, wl, args, threads, base):
        self.wl, self.args, self.threads, self.base = wl, args, threads, base
        self.id = wl.key if threads is None or base else f"{wl.key}@{threads}"
        td = thread_desc(args)
        self.label = f"{wl.label}, {td}" if td else wl.label
        self.short = f"{wl.key} ({td})" if td else wl.key


def make_cases(wl, threads_list, scale, named=False):
    """The cases of one workload: its base configuration, or one per thread count.

    A workload is swept when thread counts are given and it has a thread
    parameter and either is marked for sweeps or was named in --workloads."""
    base_t = wl.base_threads()
    counts = [None]
    if threads_list and wl.threads is not None and (wl.sweep or named):
        counts = sorted({t for t in threads_list if t >= wl.min_threads} | {base_t})
        if len(counts) == 1:
            counts = [None]
    cases = []
    for t in counts:
        args = list(wl.args)
        factor = 1.0
        if t is not None:
            if wl.threads == "t":
                args = set_arg(args, "-t", t)
            else:
                args = set_arg(set_arg(args, "-p", t), "-c", t)
            factor = SWEEP_WORK * base_t / t  # the same total work at every count
        work = parse_count(arg_value(args, wl.work))
        args = set_arg(args, wl.work, max(1, int(round(work * factor * scale))))
        cases.append(Case(wl, args, t, t is None or t == base_t))
    sweep = len(cases) > 1
    for c in cases:  # in a sweep every case names its thread count
        if sweep:
            c.id = f"{wl.key}@{c.threads}"
    return cases


def tiny_args(wl):
    """A very short run of the workload (the preload check)."""
    work = parse_count(arg_value(wl.args, wl.work))
    small = {"-n": 2000, "-r": 20, "-i": 5}.get(wl.work, 100)
    if wl.program == "large":
        small = 20
    if getattr(wl, "tiny", None) is not None:  # a real program's (programs.py)
        small = wl.tiny
    return set_arg(wl.args, wl.work, min(work, small))

