"""Instructions a bench script's measured part runs, counted by callgrind (retrieve_callgrind.py, v5_callgrind.py).

The script reruns itself under valgrind with `--measured` (`measured_setup` readies that process);
what it counts runs inside a functools.reduce call, which `--toggle-collect=functools_reduce`
counts alone.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def measured_setup(src: Path) -> list[str]:
    """In the counted process: `src`'s code and benches first on the path, warnings off; SciFact's queries."""
    sys.path.insert(0, str(src / "bench"))
    sys.path.insert(0, str(src / "src"))
    logging.disable(logging.WARNING)
    shared = Path(os.environ.get("ENGRAM_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    return [json.loads(line)["text"] for line in (shared / "data" / "scifact" / "queries.jsonl").open()]


def count(script: str, args: list[str], src: Path, prefix: str) -> tuple[int, Path]:
    """Run `script --measured args` under callgrind from `src`; the instructions counted and the profile."""
    out = Path(tempfile.mkdtemp(prefix=prefix)) / "callgrind.out"
    subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=functools_reduce",
                    f"--callgrind-out-file={out}", sys.executable, script, "--measured", *args],
                   check=True, cwd=src, capture_output=True)
    totals = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.M)
    assert totals is not None, "callgrind wrote no totals"
    return int(totals.group(1)), out
