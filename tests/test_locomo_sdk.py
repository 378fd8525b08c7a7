"""The LoCoMo fixture through the official SDKs gives the same rankings as `eval locomo`'s own requests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kindgi.client import Kindgi
from supermemory import Supermemory

from engram_index.embed.hashing import HashingEmbedder
from engram_index.locomo import load
from engram_index.locomo_faces import FACES, LIMIT, PROJECT, TENANT, iso, serve
from tests.supermemory.conftest import wait_done

TINY = Path(__file__).parent / "data" / "locomo-tiny"


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A server whose v5 namespace and Kindgi thread were filled through the SDKs, turn by turn."""
    (conv,) = load(TINY)
    with serve(tmp_path_factory.mktemp("locomo-sdk"), HashingEmbedder(64)) as served:
        v5 = Supermemory(api_key=served.v5_key, base_url=served.url, max_retries=0)
        kindgi = Kindgi(base_url=served.url, token=served.kindgi_token, max_retries=0)
        for t in conv.turns:
            ref = v5.add(conv.name, content=t.text, id=f"{conv.name}_{t.dia_id.replace(':', '_')}",
                         date=iso(t.date_ms), metadata={"diaId": t.dia_id, "speaker": t.speaker,
                                                        "session": t.session})
            assert wait_done(v5, conv.name, ref.id).system.status == "done"
            fact = kindgi.memory.write_fact(type="turn", content=t.text, observedAt=iso(t.date_ms),
                                            scope={"tenantId": TENANT, "projectId": PROJECT, "threadId": conv.name,
                                                   "sessionId": f"session_{t.session}"},
                                            subjects=[{"kind": "participant", "id": t.speaker}])
            served.kindgi_ids[fact.id] = t.dia_id
        yield served, conv, v5, kindgi


@pytest.mark.parametrize("mode", FACES["supermemory"])
def test_the_v5_sdk_search_ranks_as_the_eval_requests_do(filled: Any, mode: str) -> None:
    served, conv, v5, _ = filled
    for q in conv.questions:
        results = v5.search(conv.name, query=q.text, search_mode=mode, limit=LIMIT).results
        through_sdk = [str(r.metadata["diaId"]) for r in results]
        assert through_sdk == served.ask("supermemory", mode, q)
    first = v5.search(conv.name, query="What is the name of Ana's puppy?", search_mode=mode, limit=LIMIT).results
    assert first and first[0].metadata["diaId"] in ("D1:1", "D1:2", "D1:3", "D2:3")


@pytest.mark.parametrize("mode", FACES["kindgi"])
def test_the_kindgi_sdk_retrieve_ranks_as_the_eval_requests_do(filled: Any, mode: str) -> None:
    served, conv, _, kindgi = filled
    for q in conv.questions:
        results = kindgi.memory.retrieve(mode=mode, query=q.text, limit=LIMIT,
                                         scope={"tenantId": TENANT, "projectId": PROJECT, "threadId": conv.name}).results
        assert [served.kindgi_ids[r.fact.id] for r in results] == served.ask("kindgi", mode, q)
    found = kindgi.memory.retrieve(mode="keyword", query="violin", limit=5,
                                   scope={"tenantId": TENANT, "projectId": PROJECT, "threadId": conv.name}).results
    turns = [served.kindgi_ids[r.fact.id] for r in found]
    # The turns holding the word and the turns they are the context of (each just after its own).
    assert set(turns) == {"D1:4", "D1:5", "D2:6", "D2:7"}
    assert turns.index("D1:4") < turns.index("D1:5") and turns.index("D2:6") < turns.index("D2:7")
