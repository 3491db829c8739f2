#!/usr/bin/env python3
"""bench/call_cost.py: instructions per malloc and per free, thread by thread, under callgrind
(a producer's malloc, its consumer's remote free, a local free); the code is
bench/suitelib/call_cost.py."""

import sys

sys.dont_write_bytecode = True  # no __pycache__ under bench/

from suitelib.call_cost import main  # noqa: E402  (bench/ is on the path: this script's folder)

sys.exit(main())
