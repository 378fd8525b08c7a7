"""A Kindgi retrieve answering fewer facts than its limit says why (whyFewer), and the official SDK keeps it."""

from __future__ import annotations

from typing import Any

import pytest

from engram_index.engine.types import Document
from engram_index.kindgi.facts import space_name
from engram_index.store.sqlite import StoredDocument
from tests.kindgi.server import Server

SCOPE = {"tenantId": "acme", "projectId": "web"}


def why(response: Any) -> dict[str, Any]:
    """The explanation, as the SDK's response model keeps an extra field."""
    extra = response.model_extra or {}
    assert "whyFewer" in extra, extra
    found: dict[str, Any] = extra["whyFewer"]
    return found


def test_a_full_answer_carries_no_explanation(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    client.memory.write_fact(type="note", scope=SCOPE, content="green tea in the morning")
    response = client.memory.retrieve(mode="keyword", query="tea", limit=1)
    assert len(response.results) == 1 and "whyFewer" not in (response.model_extra or {})


def test_a_tenant_without_facts_says_it_holds_nothing(server: Server) -> None:
    response = server.client(user="alice", projects=["web"]).memory.retrieve(mode="both", query="tea")
    assert response.results == []
    assert why(response) == {"collection": "acme", "items": 0, "filters": [], "thresholdCut": 0, "loading": False,
                             "message": "acme holds nothing yet"}


def test_a_filter_that_removes_all_is_named_with_what_each_filter_left(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    for text in ("green tea in the morning", "black coffee at night"):
        client.memory.write_fact(type="note", scope=SCOPE, content=text)
    response = client.memory.retrieve(mode="keyword", query="tea", type="preference", scope=SCOPE)
    assert response.results == []
    found = why(response)
    assert found["items"] == 2
    assert found["filters"] == [{"filter": "type=preference", "left": 0},
                                {"filter": "scope.projectId=web", "left": 0}]
    assert found["message"] == "the filter type=preference left none of the 2 items"


def test_facts_another_token_cannot_see_are_not_counted(server: Server) -> None:
    server.client(user="alice", projects=["web"]).memory.write_fact(
        type="note", scope={**SCOPE, "userId": "alice"}, content="alice's green tea")
    found = why(server.client(user="bob", projects=["web"]).memory.retrieve(mode="keyword", query="tea"))
    assert found["items"] == 0 and found["message"] == "acme holds nothing yet"


def test_a_query_matching_few_says_so(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    for text in ("green tea in the morning", "black coffee at night"):
        client.memory.write_fact(type="note", scope=SCOPE, content=text)
    found = why(client.memory.retrieve(mode="keyword", query="tea", limit=5))
    assert found["message"] == "only 1 of its 2 items matched the query"


def test_an_index_behind_its_acknowledged_writes_says_it_is_loading(server: Server,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    client = server.client(user="alice", projects=["web"])
    client.memory.write_fact(type="note", scope=SCOPE, content="green tea in the morning")
    collections = server.app.state.kindgi.facts.collections
    # Over PostgreSQL the node tails the store's writes: hold that off, as for another node's write in flight.
    monkeypatch.setattr(collections, "refresh", lambda uri: 0)
    name = space_name("acme")
    collections.index(name)  # loaded, as after any search
    # Written to the store alone, as by the writer beside a reader: acknowledged, not yet in this index.
    collections.store.write(collections.info(name).id, [StoredDocument(Document(id="late", author="-", text="late"))])
    found = why(client.memory.retrieve(mode="keyword", query="coffee"))
    assert found["loading"] is True
    assert found["message"].endswith("the index is still catching up with acknowledged writes: retry shortly")
