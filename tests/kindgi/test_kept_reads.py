"""A retrieve's answer, kept behind its response, is written with a check for facts erased since it
read them only when an erasure's withhold step may have missed it (kindgi/idempotency.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from engram_index.kindgi.idempotency import Claim, Idempotency
from engram_index.kindgi.schema import migrate
from engram_index.store.sqlite import Store
from tests.limits import PATIENCE_S


class RecordingStore(Store):
    """The store, keeping the statements it ran."""

    ran: list[str] = []

    def execute(self, statements: Any) -> None:
        RecordingStore.ran += [sql for sql, _ in statements]
        super().execute(statements)


def test_a_kept_read_is_checked_for_erased_facts_only_when_an_erasure_was_withheld_since_it_began(
        tmp_path: Path) -> None:
    # An answer kept behind its response is withheld by an erasure's withhold step (in memory or in
    # the store) unless it is kept after that step ran: only then can it name a fact erased after it
    # was read, and only then does its write look the facts up (over a shared store, always).
    store = RecordingStore(tmp_path / "records.sqlite")
    migrate(store)
    for shared in (False, True):
        kept = Idempotency(store, shared=shared)
        try:
            def keep(key: str, scrub_before_claim: bool = False, scrub_after_claim: bool = False) -> str:
                began = kept.scrubs  # the request starts reading
                if scrub_before_claim:
                    kept.withhold(["erased-fact"])  # an erasure's withhold step, before the key is claimed
                claim = kept.begin(key, b"{}", began)
                assert isinstance(claim, Claim)
                if scrub_after_claim:
                    kept.withhold(["erased-fact"])  # ... or between the claim and the keep
                claim.facts = ("t", ("fact-1",))
                RecordingStore.ran = []
                kept.keep_behind(claim, 200, b'{"results": [{"fact": {"id": "fact-1"}}]}')
                kept.release(claim)
                deadline = time.monotonic() + PATIENCE_S
                while not any("kindgi_idempotency(key" in sql for sql in RecordingStore.ran):
                    assert time.monotonic() < deadline, "the kept answer was never written"
                    time.sleep(0.01)
                return next(sql for sql in RecordingStore.ran if "kindgi_idempotency(key" in sql)

            assert ("json_each" in keep(f"plain-{shared}")) == shared
            assert "json_each" in keep(f"before-{shared}", scrub_before_claim=True)
            assert "json_each" in keep(f"after-{shared}", scrub_after_claim=True)
        finally:
            kept.close()
    store.close()
