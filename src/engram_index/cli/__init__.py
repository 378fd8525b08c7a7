"""The engram-index command line: import, search, evaluate and serve (`engram-index --help`).

One module per command group, each registering its commands on `main` (cli/common.py), which
imports none of them: importing this package registers them all.
"""

from engram_index.cli import admin, agents, dev, evals, ingest, keys, locomo, search, serving  # noqa: F401 (register)
from engram_index.cli.common import DATA_HELP, console, default_service_did, eval_group, main, make_embedder, store_option

__all__ = ["DATA_HELP", "console", "default_service_did", "eval_group", "main", "make_embedder", "store_option"]
