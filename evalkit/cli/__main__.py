"""``python -m evalkit.cli``: the console script `evalkit` (bench and tests run it so)."""

import sys

from evalkit.cli import main

sys.exit(main())
