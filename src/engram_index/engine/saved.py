"""Derived data saved as a directory of arrays: one .npy file per array, JSON documents and a
meta.json, written beside the old copy and swapped in whole, so a reader sees one or the other."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def write_saved(
    path: Path, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any],
    documents: Mapping[str, Any] | None = None, *, parents: bool = True,
) -> None:
    """Write the arrays, the JSON documents and meta.json to a directory that replaces `path`.

    parents: create missing parent directories (False: a parent removed meanwhile, as a dropped
    space's, makes this fail rather than bring it back).
    """
    staged = path.with_name(path.name + ".new")
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=parents)
    for name, array in arrays.items():
        with open(staged / f"{name}.npy", "wb") as fh:
            np.save(fh, np.ascontiguousarray(array))
            fh.flush()
            os.fsync(fh.fileno())
    for name, document in (documents or {}).items():
        with open(staged / f"{name}.json", "w", encoding="utf-8") as fh:
            json.dump(document, fh, ensure_ascii=False)
            fh.flush()
            os.fsync(fh.fileno())
    (staged / "meta.json").write_text(json.dumps(dict(meta)))
    # Derived data: a crash between these two costs a rebuild. A process that mapped the old
    # files keeps them until it lets go (unlinked, not changed).
    shutil.rmtree(path, ignore_errors=True)
    os.replace(staged, path)


def read_saved(
    path: Path, arrays: Sequence[str], documents: Sequence[str] = (), *, mapped: bool = False
) -> tuple[dict[str, Any], list[np.ndarray], list[Any]] | None:
    """The meta.json, the named arrays and JSON documents of a saved directory; None when missing or torn.

    mapped: map the arrays read-only (processes share the pages) instead of reading them.
    """
    try:
        meta = json.loads((path / "meta.json").read_text())
        # Plain views of the maps: np.memmap's own indexing costs ~25 µs a call.
        loaded = [np.load(path / f"{name}.npy", mmap_mode="r" if mapped else None).view(np.ndarray)
                  for name in arrays]
        docs = [json.loads((path / f"{name}.json").read_text(encoding="utf-8")) for name in documents]
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict):
        return None
    return meta, loaded, docs
