#!/usr/bin/env python3
"""bench/standing.py: where roost stands against the best peer in each case of a saved
suite run (its suite.json); the code is bench/suitelib/standing.py."""

import sys

sys.dont_write_bytecode = True  # no __pycache__ under bench/

from suitelib.standing import main  # noqa: E402  (bench/ is on the path: this script's folder)

sys.exit(main(sys.argv))
