"""The benchmarks' Python code: the workload suite, the fast-path runner, the peer allocators,
the paired comparison, the address-space floor and the misuse comparison (bench/README.md says
what each does).

The commands are thin scripts in bench/ (suite.py, fastpath.py, peers.py, paired.py,
ulimit_floor.py, misuse_compare.py), each calling one module's main(); run from anywhere,
e.g. `python3 bench/suite.py --list`. Python puts a script's own folder first on its path, so
they import this package with no path edits.

One concern per module:

    common.py      paths, logging, number formatting, apt-get on demand (Installer)
    workloads.py   the workload table and the cases made from it (thread sweeps, --scale)
    programs.py    the real programs as workloads (CPython, g++, the SQLite shell, Perl,
                   RocksDB's db_bench, Redis): availability, runs, the LD_DEBUG preload check
    program_inputs.py  their generated inputs and the outputs each must print
    peers.py       the peer allocators: Debian packages and builds from Rust -sys crates,
                   each checked to take effect when preloaded (command: bench/peers.py)
    allocators.py  roost, glibc, the peers and the roost variants, resolved to a library to
                   preload; the machine, compiler and commit the report names
    measure.py     one benchmark process under one allocator (environment, report line,
                   verification, preload, peak RSS through a subreaper), the check runs, the
                   timed runs
    report.py      statistics (medians, ratios, geometric means), the Markdown tables on
                   stdout, suite-runs.csv, suite-summary.csv and suite.json
    docs.py        the --docs page (machine, allocators, summary, tables, plot links)
    plots.py       the plots (matplotlib, optional: here or in another python3)
    cli.py         the suite's options and main(): selection, runs, files, report; --list,
                   --self-test (command: bench/suite.py)
    fastpath.py    instructions per malloc+free pair under callgrind (command:
                   bench/fastpath.py)
    paired.py      two allocators of one suite run compared case by case, with confidence
                   intervals (command: bench/paired.py)
    ulimit_floor.py  the smallest `ulimit -v` under which a command runs, per allocator
                   (command: bench/ulimit_floor.py)
    misuse_compare.py  roost's misuse catalog in observe mode under glibc, roost's three
                   builds and the peers' hardened builds (command: bench/misuse_compare.py)
    program_costs.py  the real programs' instructions and the allocator's share of them,
                   per allocator, under callgrind (command: bench/program_costs.py)
    callgrind.py   callgrind's output files read: the calls, with their inclusive cost
                   (call_cost.py's and program_costs.py's)
"""
