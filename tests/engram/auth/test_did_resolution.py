"""DID documents resolved over real HTTP from an in-process PLC directory: caching, key rotation,
and documents that are missing, malformed, mismatched, huge or slow."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from engram_index.engram.identity.did import DidResolver, ResolveError
from engram_index.engram.identity.keys import P256, PrivateKey
from engram_index.testkit.plc import FakePlc, did_document, new_plc_did
from engram_index.testkit.serve import free_port, serving


@pytest.fixture()
def plc() -> Iterator[tuple[FakePlc, str]]:
    directory = FakePlc()
    with serving(directory.app(), probe="/_health") as url:
        yield directory, url


def publish(directory: FakePlc) -> tuple[str, PrivateKey]:
    did, key = new_plc_did(), PrivateKey.generate(P256)
    directory.publish(did, did_document(did, {"#atproto": key}, {"#atproto_pds": ("AtprotoPersonalDataServer",
                                                                                  "https://pds.example")}))
    return did, key


def test_a_plc_document_resolves_with_its_keys_and_services(plc: tuple[FakePlc, str]) -> None:
    directory, url = plc
    did, key = publish(directory)
    doc = asyncio.run(DidResolver(url).resolve(did))
    found = doc.key("#atproto")
    assert found is not None and found.did_key == key.did_key
    assert doc.key("#atproto_space") is None
    assert doc.service("#atproto_pds") == "https://pds.example"


def test_a_cached_document_is_not_fetched_again_until_a_fresh_resolution_is_asked(plc: tuple[FakePlc, str]) -> None:
    directory, url = plc
    did, _ = publish(directory)
    resolver = DidResolver(url, min_refresh=0.0)

    async def run() -> None:
        await resolver.resolve(did)
        await resolver.resolve(did)
        assert resolver.fetches == 1
        await resolver.resolve(did, fresh=True)
        assert resolver.fetches == 2

    asyncio.run(run())


def test_forced_refreshes_are_limited_to_one_per_interval(plc: tuple[FakePlc, str]) -> None:
    directory, url = plc
    did, _ = publish(directory)
    resolver = DidResolver(url, min_refresh=60.0)

    async def run() -> None:
        await resolver.resolve(did)
        for _ in range(5):
            await resolver.resolve(did, fresh=True)

    asyncio.run(run())
    assert resolver.fetches == 1


def test_concurrent_resolutions_of_one_did_fetch_once(plc: tuple[FakePlc, str]) -> None:
    directory, url = plc
    did, _ = publish(directory)
    directory.delay = 0.2
    resolver = DidResolver(url)

    async def run() -> None:
        docs = await asyncio.gather(*(resolver.resolve(did) for _ in range(10)))
        assert {d.did for d in docs} == {did}

    asyncio.run(run())
    assert resolver.fetches == 1


def test_a_missing_did_is_a_permanent_failure_and_is_remembered_briefly(plc: tuple[FakePlc, str]) -> None:
    _, url = plc
    resolver = DidResolver(url)
    did = new_plc_did()
    for _ in range(3):
        with pytest.raises(ResolveError) as info:
            asyncio.run(resolver.resolve(did))
        assert not info.value.temporary
    assert resolver.fetches == 1


def test_a_malformed_document_is_refused(plc: tuple[FakePlc, str]) -> None:
    directory, url = plc
    did, _ = publish(directory)
    directory.malformed.add(did)
    with pytest.raises(ResolveError, match="malformed"):
        asyncio.run(DidResolver(url).resolve(did))


def test_a_document_for_another_did_is_refused(plc: tuple[FakePlc, str]) -> None:
    directory, url = plc
    did, key = publish(directory)
    other = new_plc_did()
    directory.publish(other, directory.documents[did])
    with pytest.raises(ResolveError, match="id"):
        asyncio.run(DidResolver(url).resolve(other))


def test_a_huge_document_is_refused(plc: tuple[FakePlc, str]) -> None:
    directory, url = plc
    did, _ = publish(directory)
    directory.documents[did]["alsoKnownAs"] = ["at://x" * 20000]
    with pytest.raises(ResolveError, match="larger"):
        asyncio.run(DidResolver(url, max_bytes=16 * 1024).resolve(did))


def test_a_slow_directory_is_a_temporary_failure_within_the_timeout(plc: tuple[FakePlc, str]) -> None:
    directory, url = plc
    did, _ = publish(directory)
    directory.delay = 2.0
    with pytest.raises(ResolveError) as info:
        asyncio.run(DidResolver(url, timeout=0.3).resolve(did))
    assert info.value.temporary


def test_an_unreachable_directory_is_a_temporary_failure() -> None:
    with pytest.raises(ResolveError) as info:
        asyncio.run(DidResolver(f"http://127.0.0.1:{free_port()}").resolve(new_plc_did()))
    assert info.value.temporary


def test_did_web_on_localhost_needs_the_explicit_setting() -> None:
    directory = FakePlc()
    port = free_port()
    did = f"did:web:localhost%3A{port}"
    key = PrivateKey.generate(P256)
    directory.web_did = did
    directory.publish(did, did_document(did, {"#atproto": key}))
    with serving(directory.app(), port=port, probe="/_health"):
        with pytest.raises(ResolveError, match="localhost setting"):
            asyncio.run(DidResolver().resolve(did))
        doc = asyncio.run(DidResolver(allow_http_localhost=True).resolve(did))
    found = doc.key("#atproto")
    assert found is not None and found.did_key == key.did_key


@pytest.mark.parametrize("did", ["did:web:10.0.0.1", "did:web:example.com:path:more", "did:plc:short",
                                 "did:example:abc", "did:web:exa mple.com"])
def test_dids_we_do_not_resolve_are_refused_without_a_fetch(did: str) -> None:
    resolver = DidResolver("http://127.0.0.1:9")
    with pytest.raises(ResolveError):
        asyncio.run(resolver.resolve(did))
    assert resolver.fetches == 0


def test_did_web_resolves_over_https_to_the_well_known_path() -> None:
    assert DidResolver().url_for("did:web:example.com") == "https://example.com/.well-known/did.json"
    assert DidResolver().url_for("did:web:example.com%3A8443") == "https://example.com:8443/.well-known/did.json"
