import sys

from engine.cli import main
from engine.io import memory

memory.reuse_freed_blocks()  # an engine process: crop-sized temporaries are reused, not faulted in afresh
sys.exit(main())
