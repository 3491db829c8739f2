#!/usr/bin/env python3
"""bench/program_costs.py: the real programs' instructions and the allocator's share of them,
per allocator, under callgrind; the code is bench/suitelib/program_costs.py."""

import sys

sys.dont_write_bytecode = True  # no __pycache__ under bench/

from suitelib.program_costs import main  # noqa: E402  (bench/ is on the path: this script's folder)

sys.exit(main())
