"""`python -m engram_index.cli`: the command line."""

import sys

from engram_index.cli import main

sys.exit(main())
