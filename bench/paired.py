#!/usr/bin/env python3
"""bench/paired.py: the command that compares two allocators of one suite run case by case;
the code is bench/suitelib/paired.py."""

import sys

sys.dont_write_bytecode = True  # no __pycache__ under bench/

from suitelib.paired import main  # noqa: E402  (bench/ is on the path: this script's folder)

sys.exit(main(sys.argv))
