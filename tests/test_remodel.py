"""A face's collection records its embedding model; another model re-embeds it, a mismatch is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from engram_index.collections import Collections
from engram_index.embed.hashing import HashingEmbedder
from engram_index.engine.types import Document, SearchRequest
from engram_index.errors import ModelMismatch
from engram_index.remodel import check_model, declare_model, reembed_all
from engram_index.store.sqlite import StoredDocument

TEXTS = {"a": "the harbour closes at dusk", "b": "ferries leave every hour", "c": "pasta with tomatoes"}
OLD, NEW = HashingEmbedder(16), HashingEmbedder(24)


@pytest.fixture
def spaces(tmp_path: Path) -> Iterator[Collections]:
    opened = Collections(tmp_path)
    yield opened
    opened.close()


def fill(spaces: Collections, uri: str) -> None:
    declare_model(spaces, uri, OLD)
    vectors = OLD.embed_documents(list(TEXTS.values()))
    spaces.write(uri, [StoredDocument(Document(i, "", text, ("t",), vector=np.asarray(v, "<f2").tobytes()))
                       for (i, text), v in zip(TEXTS.items(), vectors)])


def test_a_new_collection_records_the_model_of_its_embedder(spaces: Collections) -> None:
    assert declare_model(spaces, "face:one", NEW).model == NEW.identity
    assert declare_model(spaces, "face:none", None).model is None


def test_a_collection_of_another_model_is_re_embedded_with_the_new_one(spaces: Collections) -> None:
    fill(spaces, "face:one")
    spaces.index("face:one")  # loaded: the new vectors are swapped into the live index
    info = declare_model(spaces, "face:one", NEW)
    assert info.model == NEW.identity and info.next_model is None
    for doc_id, text in TEXTS.items():
        found = spaces.store.document_by_id(info.id, doc_id)
        assert found is not None
        assert found[1].vector == np.asarray(NEW.embed_documents([text])[0], "<f2").tobytes()
        assert found[1].tags == ("t",) and found[1].next_vector is None
    hits = spaces.search("face:one", SearchRequest("vector", vector=NEW.embed_queries([TEXTS["b"]])[0], limit=3)).hits
    assert hits[0].document.id == "b"


def test_a_collection_of_the_same_model_is_left_as_it_is(spaces: Collections) -> None:
    fill(spaces, "face:one")
    seq = spaces.info("face:one").seq
    assert declare_model(spaces, "face:one", OLD).seq == seq


def test_without_an_embedder_a_collection_keeps_its_model(spaces: Collections) -> None:
    fill(spaces, "face:one")
    assert declare_model(spaces, "face:one", None).model == OLD.identity


def test_a_query_vector_of_another_model_is_refused_naming_both_models(spaces: Collections) -> None:
    fill(spaces, "face:one")
    info = spaces.info("face:one")
    check_model(info, OLD.identity)
    with pytest.raises(ModelMismatch, match=r"face:one holds vectors of hashing.*16 dimensions.*24 dimensions") as err:
        check_model(info, NEW.identity)
    assert err.value.status == 400


def test_opening_a_face_re_embeds_only_its_own_collections_of_another_model(spaces: Collections) -> None:
    fill(spaces, "face:one")
    fill(spaces, "other:two")
    thread = reembed_all(spaces, "face:", NEW)
    assert thread is not None
    thread.join()
    assert spaces.info("face:one").model == NEW.identity
    assert spaces.info("other:two").model == OLD.identity
    assert reembed_all(spaces, "face:", NEW) is None  # nothing left to move
    assert reembed_all(spaces, "face:", None) is None
