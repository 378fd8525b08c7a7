"""The Kindgi face's state on one app: tokens, facts, retrieval, erasures, kept answers."""

from __future__ import annotations

from dataclasses import dataclass

from engram_index.collections import Collections
from engram_index.embed.base import Embedder
from engram_index.keys import KeyStore
from engram_index.kindgi.erasures import Erasures
from engram_index.errors import IndexLoading
from engram_index.kindgi.facts import SPACE_PREFIX, Facts
from engram_index.kindgi.idempotency import Idempotency
from engram_index.kindgi.retrieve import Retriever
from engram_index.kindgi.schema import migrate
from engram_index.kindgi.revisions import embedding_text
from engram_index.remodel import reembed_all


@dataclass
class KindgiFace:
    """Everything the memory routes need; `read_only` (serve --workers) answers 501 on every route."""

    keys: KeyStore
    facts: Facts | None
    retriever: Retriever | None
    erasures: Erasures | None
    idempotency: Idempotency | None
    read_only: bool = False

    @classmethod
    def open(cls, collections: Collections, embedder: Embedder | None) -> KindgiFace:
        """Set the face up over a data directory's collections (migrating its tables when writable)."""
        keys = KeyStore(collections.data_dir, collections.shared_store())
        if collections.read_only:
            return cls(keys, None, None, None, None, read_only=True)
        migrate(collections.store)
        for name in collections.store.collections():
            if name.startswith(SPACE_PREFIX):
                try:  # load each tenant's index in the background, so that no first retrieve waits for it
                    collections.index_if_loaded(name)
                except IndexLoading:
                    pass
        facts = Facts(collections, embedder)
        facts.reembedding = reembed_all(collections, SPACE_PREFIX, embedder, embedding_text)  # tenants of another model move
        idempotency = Idempotency(collections.store, shared=collections.shared_store() is not None)
        erasures = Erasures(facts, idempotency)
        erasures.resume_pending()
        return cls(keys, facts, Retriever(facts), erasures, idempotency)

    def close(self) -> None:
        """Let running erasures finish and close the keys file."""
        if self.erasures is not None:
            self.erasures.join()
        if self.idempotency is not None:
            self.idempotency.close()
        if self.retriever is not None:
            self.retriever.close()
        self.keys.close()
