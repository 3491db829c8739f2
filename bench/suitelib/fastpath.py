"""The single-thread fast-path benchmark's runner (command: bench/fastpath.py): instructions
per malloc+free pair, per allocator, under callgrind.

Runs build/<dir>/bench/bench_fastpath under `valgrind --tool=callgrind` for every
allocator (roost and mimalloc by LD_PRELOAD, glibc without) and every workload,
at two iteration counts N1 < N2, and reports (Ir(N2) - Ir(N1)) / (N2 - N1): the
instructions one malloc+free pair costs, with startup, table building and
warm-up cancelled out. Prints Markdown tables on stdout, progress on stderr,
and writes a CSV (build/bench/fastpath.csv by default). See bench/README.md.
"""

import argparse
import concurrent.futures
import csv
import os
import re
import shutil
import subprocess
import tempfile
import time

from . import peers
from .allocators import GLIBC, ROOST, glibc_version
from .common import REPO, Installer, last_lines, list_written, log, note_written, rel
from .measure import provider_ok, run_env

# (label, mode arguments of bench_fastpath). Sizes in bytes.
WORKLOADS = [
    ("fixed 16 B", ["fixed", "16"]),
    ("fixed 64 B", ["fixed", "64"]),
    ("fixed 256 B", ["fixed", "256"]),
    ("fixed 1024 B", ["fixed", "1024"]),
    ("random 16..1024 B", ["random", "16", "1024"]),
]

MIMALLOC = "mimalloc-2.0 (Debian)"
COLUMNS = [ROOST, GLIBC, MIMALLOC]


def malloc_provider(stdout):
    m = re.search(r"malloc_from=(\S+)", stdout)
    return m.group(1) if m else None


def check_preload(binary, name, lib):
    """Runs natively once; returns None if malloc comes from `lib`, else a reason."""
    r = subprocess.run([binary, "fixed", "16", "1000"], env=run_env(lib), capture_output=True,
                       text=True)
    provider = malloc_provider(r.stdout)
    if r.returncode != 0:
        return f"test run failed (exit {r.returncode}): {r.stderr.strip()[:200]}"
    if not provider_ok(lib, provider):
        why = r.stderr.strip()[:200]
        return f"preload did not take effect: malloc resolved to {provider}" + (
            f" ({why})" if why else "")
    return None


def check_roost_stats(binary, lib):
    """ROOST_STATS=1 must make roost print 'roost:' lines at exit."""
    r = subprocess.run([binary, "fixed", "16", "1000"], env=run_env(lib, {"ROOST_STATS": "1"}),
                       capture_output=True, text=True)
    lines = [l for l in r.stderr.splitlines() if l.startswith("roost:")]
    if lines:
        return f"ROOST_STATS=1 printed {len(lines)} 'roost:' lines"
    return "warning: ROOST_STATS=1 printed no 'roost:' lines"


def run_callgrind(valgrind, binary, lib, args):
    """One run under callgrind. Returns (instructions, None) or (None, reason)."""
    with tempfile.NamedTemporaryFile(prefix="fastpath-vg-", suffix=".log", delete=False) as f:
        vglog = f.name
    try:
        cmd = [valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null",
               "--log-file=" + vglog, binary] + args
        env = run_env(None if lib == "noop" else lib)
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        with open(vglog, errors="replace") as f:
            text = f.read()
    except subprocess.TimeoutExpired:
        return None, "callgrind run timed out"
    finally:
        os.unlink(vglog)
    if r.returncode != 0:
        return None, f"exit {r.returncode}: {last_lines(r.stderr.strip() or text)[:200]}"
    provider = malloc_provider(r.stdout)
    if lib != "noop" and not provider_ok(lib, provider):
        return None, f"preload not in effect under valgrind (malloc from {provider})"
    m = re.search(r"Collected\s*:\s*(\d+)", text) or re.search(r"I\s+refs:\s*([\d,]+)", text)
    if m is None:
        return None, "no instruction total in valgrind's output"
    return int(m.group(1).replace(",", "")), None


def symbol_extent(lib, sym):
    """(start, end) of a dynamic symbol from nm -D -S, or None."""
    r = subprocess.run(["nm", "-D", "-S", "--defined-only", lib], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3] == sym and parts[2] in "TtWi":
            start, size = int(parts[0], 16), int(parts[1], 16)
            if size > 0:
                return start, start + size
    return None


def disassembly(lib, sym):
    """Instruction counts of a symbol's body: dict or a reason string."""
    ext = symbol_extent(lib, sym)
    if ext is None:
        return f"no sized dynamic symbol {sym}"
    start, end = ext
    r = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", f"--start-address={start:#x}",
                        f"--stop-address={end:#x}", lib], capture_output=True, text=True)
    insns = []
    for line in r.stdout.splitlines():
        m = re.match(r"^\s*([0-9a-f]+):\s+(\S.*)$", line)
        if m:
            insns.append((int(m.group(1), 16), m.group(2).strip()))
    def is_nop(text):
        t = text.split("#")[0].strip()
        return "nop" in t or t in ("xchg   %ax,%ax", "xchg %ax,%ax")

    real = [(a, t) for a, t in insns if not is_nop(t)]
    to_ret = None
    for i, (_, t) in enumerate(real):
        if t.split()[0] in ("ret", "retq"):
            to_ret = i + 1
            break
    tails = []
    for _, t in real:
        m = re.match(r"^jmp\s+([0-9a-f]+)\s+<(.*)>", t)
        if m and not start <= int(m.group(1), 16) < end:
            name = re.sub(r"\(.*", "", m.group(2))
            if name not in tails:
                tails.append(name)
    return {"count": len(real), "nops": len(insns) - len(real), "to_ret": to_ret, "tails": tails}


def fmt(x):
    return f"{x:.1f}"


def main():
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build", "release"))
    ap.add_argument("--csv", default=os.path.join(REPO, "build", "bench", "fastpath.csv"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--n1", type=int, default=50 * 4096, help="short run length (pairs)")
    ap.add_argument("--n2", type=int, default=300 * 4096, help="long run length (pairs)")
    ap.add_argument("--window", type=int, default=64, help="live objects in the window variant")
    opts = ap.parse_args()
    if not 0 < opts.n1 < opts.n2:
        ap.error("need 0 < n1 < n2")

    binary = os.path.join(opts.build_dir, "bench", "bench_fastpath")
    if not os.access(binary, os.X_OK):
        log(f"fastpath: {rel(binary)} not built (run `make release` or bench/run)")
        return 1
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        reason = Installer(True).install("valgrind")
        valgrind = shutil.which("valgrind")
        if valgrind is None:
            log(f"fastpath: valgrind is required and missing ({reason})")
            return 1

    # Allocators: name -> library to preload (None = glibc), or a reason it is missing.
    libs, missing, notes = {}, {}, []
    roost_lib = os.path.join(opts.build_dir, "libroost.so")
    if os.path.exists(roost_lib):
        libs[ROOST] = roost_lib
    else:
        missing[ROOST] = f"{rel(roost_lib)} not built (`make release` failed or not run)"
    libs[GLIBC] = None
    mi = peers.ensure_peers(names=["mimalloc"])["mimalloc"]
    mi_path = mi.get("lib")
    if mi_path:
        libs[MIMALLOC] = mi_path
    else:
        missing[MIMALLOC] = mi["missing"]
    for name in list(libs):
        reason = check_preload(binary, name, libs[name])
        if reason:
            missing[name] = reason
            del libs[name]
    if ROOST in libs:
        notes.append(f"roost: preload verified ({check_roost_stats(binary, libs[ROOST])})")

    variants = [("immediate", 0), ("window", opts.window)]
    jobs = []  # (variant, workload label, allocator, n, argv)
    for vname, w in variants:
        wflag = ["--window", str(w)] if w else []
        for label, args in WORKLOADS:
            for name in COLUMNS:
                if name in libs:
                    for n in (opts.n1, opts.n2):
                        jobs.append((vname, label, name, n, wflag + args + [str(n)]))
        for n in (opts.n1, opts.n2):
            jobs.append((vname, "harness", "noop", n, ["--noop"] + wflag + ["fixed", "16", str(n)]))

    log(f"fastpath: {len(jobs)} callgrind runs, {opts.jobs} at a time, N1={opts.n1} N2={opts.n2}")
    results = {}
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
        futs = {}
        for job in jobs:
            lib = "noop" if job[2] == "noop" else libs[job[2]]
            futs[pool.submit(run_callgrind, valgrind, binary, lib, job[4])] = job
        for done, fut in enumerate(concurrent.futures.as_completed(futs), 1):
            vname, label, name, n, _ = job = futs[fut]
            ir, err = fut.result()
            results[job[:4]] = (ir, err)
            what = f"{ir:,} Ir" if ir is not None else "FAILED: " + err
            log(f"  [{done}/{len(jobs)}] {vname} {label} {name} n={n}: {what}"
                f" ({time.time() - t0:.0f}s)")

    def per_pair(vname, label, name):
        """(value, None) or (None, reason)."""
        (a, ea), (b, eb) = (results[(vname, label, name, n)] for n in (opts.n1, opts.n2))
        if ea or eb:
            return None, ea or eb
        return (b - a) / (opts.n2 - opts.n1), None

    rows = []  # CSV rows
    out = []
    out.append("## Single-thread fast path: instructions per malloc+free pair")
    out.append("")
    out.append(f"callgrind Ir, (Ir(N2) - Ir(N1)) / (N2 - N1) with N1 = {opts.n1}, N2 = {opts.n2} "
               "pairs; lower is better.")
    errors = []
    for vname, w in variants:
        out.append("")
        if w == 0:
            out.append("### immediate: `p = malloc(n); free(p)` (nothing else live)")
        else:
            out.append(f"### window: {w} objects live, each pair frees the object allocated "
                       f"{w} pairs earlier")
        out.append("")
        out.append("| workload | " + " | ".join(COLUMNS) + " | roost / glibc |")
        out.append("|---|" + "---:|" * (len(COLUMNS) + 1))
        for label, _ in WORKLOADS:
            vals, cells = {}, []
            for name in COLUMNS:
                if name in missing:
                    cells.append("missing")
                    status, val = "missing: " + missing[name], None
                else:
                    val, err = per_pair(vname, label, name)
                    cells.append(fmt(val) if err is None else "error")
                    status = "ok" if err is None else "error: " + err
                    if err:
                        errors.append(f"{vname} {label} {name}: {err}")
                vals[name] = val
                lib = libs.get(name) or ""
                r1 = results.get((vname, label, name, opts.n1), (None, None))[0]
                r2 = results.get((vname, label, name, opts.n2), (None, None))[0]
                rows.append([vname, w, label, name, rel(lib) if lib else "", status, opts.n1,
                             opts.n2, r1 if r1 is not None else "", r2 if r2 is not None else "",
                             f"{val:.2f}" if val is not None else ""])
            ratio = (f"{vals[ROOST] / vals[GLIBC]:.2f}" if vals.get(ROOST) and vals.get(GLIBC)
                     else "n/a")
            out.append(f"| {label} | " + " | ".join(cells) + f" | {ratio} |")
    out.append("")
    harness = []
    for vname, w in variants:
        val, err = per_pair(vname, "harness", "noop")
        harness.append(f"{fmt(val) if err is None else 'error'} ({vname})")
        r1, r2 = (results[(vname, "harness", "noop", n)][0] for n in (opts.n1, opts.n2))
        rows.append([vname, w, "harness", "noop", "", "ok" if err is None else "error: " + err,
                     opts.n1, opts.n2, r1 or "", r2 or "", f"{val:.2f}" if val is not None else ""])
    out.append("Harness overhead included in every figure (the same loop calling two empty "
               "functions, their `ret`s included): " + ", ".join(harness)
               + " instructions per pair.")
    out.append("")
    descr = {ROOST: f"LD_PRELOAD={rel(roost_lib)}",
             GLIBC: f"glibc {glibc_version()}, no preload",
             MIMALLOC: f"LD_PRELOAD={mi_path} ({mi['source']})" if mi_path else ""}
    for name in COLUMNS:
        if name in missing:
            out.append(f"- {name}: **missing**: {missing[name]}")
        else:
            out.append(f"- {name}: {descr[name]}")
    for note in notes:
        out.append(f"- {note}")
    for e in errors:
        out.append(f"- error: {e}")
    out.append("")
    if os.path.exists(roost_lib):
        dm, df = disassembly(roost_lib, "malloc"), disassembly(roost_lib, "free")
        if isinstance(dm, dict) and isinstance(df, dict):
            out.append(f"disassembly: malloc {dm['count']} instructions, free {df['count']} "
                       "instructions")
            out.append("")
            out.append(f"(whole bodies of the `malloc` and `free` symbols in {rel(roost_lib)} as "
                       f"objdump shows them, alignment nops excluded; straight line from entry to "
                       f"the first ret: malloc {dm['to_ret']}, free {df['to_ret']}; tail calls "
                       f"out: malloc -> {', '.join(dm['tails']) or 'none'}; "
                       f"free -> {', '.join(df['tails']) or 'none'})")
        else:
            out.append(f"disassembly: unavailable (malloc: {dm if isinstance(dm, str) else 'ok'}; "
                       f"free: {df if isinstance(df, str) else 'ok'})")
    else:
        out.append(f"disassembly: skipped, {rel(roost_lib)} is not built")
    print("\n".join(out))

    os.makedirs(os.path.dirname(os.path.abspath(opts.csv)), exist_ok=True)
    with open(opts.csv, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["variant", "window", "workload", "allocator", "library", "status", "n1", "n2",
                     "ir_n1", "ir_n2", "instr_per_pair"])
        wr.writerows(rows)
    note_written(opts.csv, "instructions per malloc+free pair, per workload and allocator")
    log(f"fastpath: done ({time.time() - t0:.0f}s)")
    list_written("fastpath")
    return 1 if errors else 0
