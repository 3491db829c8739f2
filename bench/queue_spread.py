#!/usr/bin/env python3
"""bench/queue_spread.py: the spread over many runs of xmalloc's peak queue and peak RSS per
allocator (how far producers run ahead of their consumers); the code is
bench/suitelib/queue_spread.py."""

import sys

sys.dont_write_bytecode = True  # no __pycache__ under bench/

from suitelib.queue_spread import main  # noqa: E402  (bench/ is on the path: this script's folder)

sys.exit(main())
