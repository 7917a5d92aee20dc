"""``python -m engine.server``: the same as ``python -m engine serve``."""

import sys

from .cli import main

sys.exit(main(sys.argv[1:]))
