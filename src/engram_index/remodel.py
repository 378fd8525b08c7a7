"""A face's collection keeps the model its vectors come from; a change of model re-embeds it.

Each collection records its embedding identity (model, digest, dimensions) in the store. A face
that embeds its own items (v5, Kindgi) declares its embedder's identity when it first touches a
collection in a process: a new collection takes it; one of another model (the server restarted
with another `--face-embedder`, or the int8 default replacing float32) is re-embedded as garden
spaces move models: the new vectors are written beside the old ones as the collection's next
model, then swapped in at once (`Collections.switch_model`). No search ever mixes the two
models' vectors; until the move is done, a query vector of the new model is refused with
`ModelMismatch` naming both models, and a face searches that collection by keyword.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence

import numpy as np

from engram_index.collections import Collections
from engram_index.embed.base import Embedder
from engram_index.engine.types import Document, ModelIdentity
from engram_index.errors import ModelMismatch, UnknownSpace
from engram_index.store.sqlite import CollectionInfo, StoredDocument

log = logging.getLogger(__name__)

REEMBED_BATCH = 256  # documents embedded and written per transaction while a collection moves


def describe(model: ModelIdentity | None) -> str:
    """A model as an operator reads it: name, digest and dimensions."""
    return "no model" if model is None else f"{model.model} ({model.digest}, {model.dims} dimensions)"


def check_model(info: CollectionInfo, model: ModelIdentity | None) -> None:
    """Refuse (ModelMismatch) a query vector of `model` for a collection of another model."""
    if info.model != model:
        raise ModelMismatch(f"the collection {info.uri} holds vectors of {describe(info.model)}; this server"
                            f" embeds with {describe(model)}: re-embed it (it is re-embedded when a face opens it)")


def declare_model(collections: Collections, uri: str, embedder: Embedder | None,
                  text_of: Callable[[Document], str] = lambda doc: doc.text) -> CollectionInfo:
    """Create the collection with the embedder's model, or re-embed an existing one of another model.

    `text_of` gives the text a stored document was embedded from. Without an embedder the
    collection keeps what it has (a face then searches it by keyword).
    """
    model = embedder.identity if embedder is not None else None
    try:
        info = collections.info(uri)
    except UnknownSpace:
        return collections.ensure_collection(uri, model)
    if embedder is None or info.model == model:
        return info
    if info.model is None and collections.store.count(info.id) == 0:
        return collections.ensure_collection(uri, model)
    return reembed(collections, uri, embedder, text_of)


def reembed(collections: Collections, uri: str, embedder: Embedder,
            text_of: Callable[[Document], str] = lambda doc: doc.text) -> CollectionInfo:
    """Embed every live document again with `embedder` as the collection's next model, then switch."""
    model = embedder.identity
    # The collection's own lock, held for the whole move: a face's write in between would carry no
    # vector of the new model (it reenters this lock, so it simply waits).
    with collections._collection_lock(uri):
        before = collections.info(uri)
        if before.model == model:  # moved meanwhile (the face's first write and its opening both ask)
            return before
        log.info("re-embedding %s: %s -> %s", uri, describe(before.model), describe(model))
        collections.set_next_model(uri, model)
        info = collections.info(uri)
        pending: list[Document] = []
        for batch in collections.store.changes_since(info.id, 0):
            pending += [change.document for change in batch if change.document is not None]
            while len(pending) >= REEMBED_BATCH:
                _write_next(collections, uri, embedder, pending[:REEMBED_BATCH], text_of)
                del pending[:REEMBED_BATCH]
        if pending:
            _write_next(collections, uri, embedder, pending, text_of)
        collections.switch_model(uri)
        return collections.info(uri)


def _write_next(collections: Collections, uri: str, embedder: Embedder, docs: Sequence[Document],
                text_of: Callable[[Document], str]) -> None:
    """Write documents again with their vectors of the next model (texts without words get none)."""
    texts = [text_of(doc) for doc in docs]
    wanted = [i for i, text in enumerate(texts) if text.strip()]
    vectors = embedder.embed_documents([texts[i] for i in wanted]) if wanted else np.zeros((0, 0))
    by_row = {i: np.asarray(vectors[row], "<f2").tobytes() for row, i in enumerate(wanted)}
    collections.write(uri, [StoredDocument(dataclasses.replace(doc, next_vector=by_row.get(i)))
                            for i, doc in enumerate(docs)])


def reembed_all(collections: Collections, prefix: str, embedder: Embedder | None,
                text_of: Callable[[Document], str] = lambda doc: doc.text) -> threading.Thread | None:
    """Re-embed, on a background thread, every collection named `prefix…` of a model other than the
    embedder's (None when there is none to move); `text_of` as for `declare_model`."""
    if embedder is None:
        return None
    stale = [uri for uri in collections.store.collections() if uri.startswith(prefix)
             and collections.info(uri).model not in (None, embedder.identity)]
    if not stale:
        return None

    def run() -> None:
        for uri in stale:
            try:
                declare_model(collections, uri, embedder, text_of)
            except Exception:  # a failed move leaves the collection on its old model, searched by keyword
                log.exception("re-embedding %s failed", uri)

    thread = threading.Thread(target=run, name="reembed", daemon=True)
    thread.start()
    return thread
