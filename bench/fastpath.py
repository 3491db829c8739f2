#!/usr/bin/env python3
"""bench/fastpath.py: the single-thread fast-path benchmark's command (instructions per
malloc+free pair under callgrind); the code is bench/suitelib/fastpath.py."""

import sys

sys.dont_write_bytecode = True  # no __pycache__ under bench/

from suitelib.fastpath import main  # noqa: E402  (bench/ is on the path: this script's folder)

sys.exit(main())
