#!/usr/bin/env python3
"""bench/ulimit_floor.py: the command that finds, per allocator, the smallest `ulimit -v` under
which a command runs; the code is bench/suitelib/ulimit_floor.py."""

import sys

sys.dont_write_bytecode = True  # no __pycache__ under bench/

from suitelib.ulimit_floor import main  # noqa: E402  (bench/ is on the path: this script's folder)

sys.exit(main())
