"""The benchmark suite's code (bench/suite.py is its command; bench/README.md says what it does).

One concern per module:

    common.py      paths, logging, number formatting
    workloads.py   the workload table and the cases made from it (thread sweeps, --scale)
    allocators.py  roost, glibc, the peers (bench/peers.py) and the roost variants, resolved to
                   a library to preload; the machine, compiler and commit the report names
    measure.py     one benchmark process under one allocator (report line, verification,
                   preload, peak RSS through a subreaper), the check runs, the timed runs
    report.py      statistics (medians, ratios, geometric means), the Markdown tables on
                   stdout, suite-runs.csv, suite-summary.csv and suite.json
    docs.py        the --docs page (machine, allocators, summary, tables, plot links)
    plots.py       the plots (matplotlib, here or in another python3)
    cli.py         the options and main(): selection, runs, files, report; --list, --self-test
"""
