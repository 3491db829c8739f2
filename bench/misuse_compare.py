#!/usr/bin/env python3
"""bench/misuse_compare.py: the command that runs roost's misuse catalog in observe mode under
glibc, roost's three builds and the peers' hardened builds and prints what each allocator did
with each misuse; the code is bench/suitelib/misuse_compare.py. It only reads the catalog: it
must never change what the catalog expects of roost."""

import sys

sys.dont_write_bytecode = True  # no __pycache__ under bench/

from suitelib.misuse_compare import main  # noqa: E402  (bench/ is on the path: this script's folder)

sys.exit(main())
