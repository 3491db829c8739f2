#!/usr/bin/env python3
"""bench/peers.py: the command that provides the peer allocators and prints them as JSON; the
code is bench/suitelib/peers.py."""

import sys

sys.dont_write_bytecode = True  # no __pycache__ under bench/

from suitelib.peers import main  # noqa: E402  (bench/ is on the path: this script's folder)

sys.exit(main())
