#!/usr/bin/env python3
"""bench/idle_return.py: the command that measures, per allocator, the memory given back while
the program sleeps; the code is bench/suitelib/idle_return.py."""

import sys

sys.dont_write_bytecode = True  # no __pycache__ under bench/

from suitelib.idle_return import main  # noqa: E402  (bench/ is on the path: this script's folder)

sys.exit(main())
