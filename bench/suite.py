#!/usr/bin/env python3
"""bench/suite.py: the benchmark suite, roost against every allocator a user would pick instead.

Runs the workload programs (build/<dir>/bench/bench_*) and real programs from
Debian's packages (CPython, g++, the SQLite shell, Perl, RocksDB's db_bench:
bench/suitelib/programs.py) under every allocator, swapped in with LD_PRELOAD: roost (build/<dir>/libroost.so), glibc (no
preload) and the peers that bench/suitelib/peers.py provides (Debian's
mimalloc, jemalloc, tcmalloc and tbbmalloc; snmalloc and mimalloc v2/v3 built
from their Rust -sys crates), plus opt-in roost variants (roost-nobatchit,
roost-noreserve; NAME@VAR=VALUE adds environment). Repetitions are
interleaved: repetition 1 runs every case under every allocator, then
repetition 2, and so on, with the allocator order rotated each time, so a slow
phase of a shared machine hits every allocator alike. The figure (a higher-is-
better throughput) and the wall time come from the program's own report line,
the peak RSS from os.wait4 (ru_maxrss) of a subreaper-launched child. Every
run must pass the program's own verification (verify=ok, exit 0) and report
that malloc came from the expected shared object (malloc_from=). A real
program's figure is 1 / its whole run's wall time, its output is checked
against what the suite computed from the input it generated, and its check
run shows, under LD_DEBUG, every process of its tree taking malloc from the
allocator's library.

Prints Markdown tables on stdout (per case, per allocator: median figure with
min-max, median peak RSS with min-max, ratios to the best; then each
allocator's figure relative to roost for every case, with geometric means),
progress on stderr, and writes build/bench/suite-runs.csv (every run),
build/bench/suite-summary.csv, build/bench/suite.json (configuration, machine,
allocators and their versions, roost commit, summary, runs) and, with
matplotlib, plots (throughput against thread count for each swept workload;
time relative to the best, one group per workload). --docs FILE writes the
whole report as a Markdown page with the plots beside it (FILE's folder/bench/).
See bench/README.md.

This file is the command; the code is the package bench/suitelib/ (its
__init__.py lists the modules).
"""

import sys

sys.dont_write_bytecode = True  # no __pycache__ under bench/

from suitelib.cli import main  # noqa: E402  (bench/ is on the path: this script's folder)

sys.exit(main())
