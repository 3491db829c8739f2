#!/usr/bin/env python3
"""bench/stalls.py: the command that runs workloads many times per allocator and shows the
distribution of their wall times (the slowest runs, not only the median); the code is
bench/suitelib/stalls.py."""

import sys

sys.dont_write_bytecode = True  # no __pycache__ under bench/

from suitelib.stalls import main  # noqa: E402  (bench/ is on the path: this script's folder)

sys.exit(main())
