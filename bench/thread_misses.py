#!/usr/bin/env python3
"""bench/thread_misses.py: the application's threads' instructions and cache misses under
callgrind, roost's service thread apart; the code is bench/suitelib/thread_misses.py."""

import sys

sys.dont_write_bytecode = True  # no __pycache__ under bench/

from suitelib.thread_misses import main  # noqa: E402  (bench/ is on the path: this script's folder)

sys.exit(main())
