"""The options every in-process bench over a data directory takes, and its set-up: the checkout whose
code runs first on the path, and the machine printed (bench/kindgi_list.py, kindgi_scrub.py, v5_reads.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from machine import print_machine

_ROOT = Path(__file__).resolve().parents[1]


def parsed(doc: str | None, **options: Any) -> argparse.Namespace:
    """`--data DIR` (required), the bench's own `options` (each `--name`, typed as its default) and `--src
    CHECKOUT` (this one by default), parsed; the checkout's code put first on the path; the machine printed."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    for name, default in options.items():
        parser.add_argument(f"--{name}", type=type(default), default=default)
    parser.add_argument("--src", type=Path, default=_ROOT, help="the checkout whose code runs")
    args = parser.parse_args()
    sys.path.insert(0, str(args.src / "src"))
    print_machine()
    return args
