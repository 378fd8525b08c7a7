"""Bearer keys: minted once, stored hashed, looked up per face, expired and revoked while in use."""

from pathlib import Path
from typing import Any

import pytest

from engram_index.errors import InvalidInput
from engram_index.keys import KEYS_FILE, KeyState, KeyStore


def test_a_minted_key_is_found_with_its_grants(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    token, record = store.create("supermemory", {"namespaces": ["a"]}, label="ci")
    state, found = store.lookup("supermemory", token)
    assert state is KeyState.VALID and found is not None
    assert found.id == record.id and found.grants == {"namespaces": ["a"]} and found.label == "ci"
    assert token.startswith(f"sm_{record.id}_")


def test_only_the_hash_of_a_key_is_stored(tmp_path: Path) -> None:
    token, record = KeyStore(tmp_path).create("kindgi", {"tenant": "t"})
    # The secret is all after the prefix and the id: it may hold "_" itself, so a split on the
    # last "_" could leave a single character, which a SQLite file holds by chance.
    secret = token.split("_", 2)[2]
    assert len(secret) >= 40 and token == f"kg_{record.id}_{secret}"
    assert secret.encode() not in (tmp_path / KEYS_FILE).read_bytes()


def test_a_key_of_another_face_is_unknown(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    token, _ = store.create("kindgi", {"tenant": "t"})
    assert store.lookup("supermemory", token) == (KeyState.UNKNOWN, None)


def test_a_made_up_key_is_unknown(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    token, _ = store.create("supermemory", {})
    assert store.lookup("supermemory", token[:-1] + ("A" if token[-1] != "A" else "B"))[0] is KeyState.UNKNOWN


def test_a_revoked_key_is_refused_by_another_open_store(tmp_path: Path) -> None:
    serving = KeyStore(tmp_path)
    token, record = serving.create("supermemory", {})
    assert serving.lookup("supermemory", token)[0] is KeyState.VALID
    KeyStore(tmp_path).revoke(record.id)  # as `engram-index keys revoke` would, beside the service
    assert serving.lookup("supermemory", token)[0] is KeyState.REVOKED


def test_an_expired_key_says_so(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    token, _ = store.create("kindgi", {"tenant": "t"}, expires_ms=1)
    assert store.lookup("kindgi", token)[0] is KeyState.EXPIRED


def test_keys_list_by_face_without_secrets(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    store.create("supermemory", {})
    store.create("kindgi", {"tenant": "t"})
    assert sorted(k.face for k in store.list()) == ["kindgi", "supermemory"]
    assert [k.face for k in store.list("kindgi")] == ["kindgi"]


def test_revoking_an_unknown_key_id_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no key"):
        KeyStore(tmp_path).revoke("nope")


def test_an_unknown_face_cannot_mint_keys(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="unknown face"):
        KeyStore(tmp_path).create("other", {})


def test_the_cli_mints_lists_and_revokes_keys(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from engram_index.cli import main

    runner = CliRunner()
    made = runner.invoke(main, ["keys", "create", "supermemory", "--data", str(tmp_path), "--namespace", "notes"])
    assert made.exit_code == 0, made.output
    token = made.output.split()[-1]
    key_id = token.split("_")[1]
    state, record = KeyStore(tmp_path).lookup("supermemory", token)
    assert state is KeyState.VALID and record is not None and record.grants == {"namespaces": ["notes"]}
    listed = runner.invoke(main, ["keys", "list", "--data", str(tmp_path), "--json"])
    assert key_id in listed.output and token.split("_", 2)[2] not in listed.output
    assert runner.invoke(main, ["keys", "revoke", key_id, "--data", str(tmp_path)]).exit_code == 0
    assert KeyStore(tmp_path).lookup("supermemory", token)[0] is KeyState.REVOKED


def test_the_cli_mints_a_kindgi_token_with_its_principal(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from engram_index.cli import main

    made = CliRunner().invoke(main, ["keys", "create", "kindgi", "--data", str(tmp_path), "--tenant", "acme",
                                     "--user", "alice", "--org", "eng", "--project", "web", "--project", "api"])
    assert made.exit_code == 0, made.output
    record = KeyStore(tmp_path).lookup("kindgi", made.output.split()[-1])[1]
    assert record is not None and record.grants == {
        "tenant": "acme", "user": "alice", "orgs": ["eng"], "projects": ["api", "web"], "admin": False}


@pytest.mark.parametrize("args, message", [
    (["kindgi"], "--tenant"),
    (["supermemory", "--tenant", "t"], "are for kindgi"),
    (["kindgi", "--tenant", "t", "--namespace", "n"], "--namespace is for supermemory"),
    (["kindgi", "--tenant", "t", "--admin", "--user", "u"], "--admin reaches"),
])
def test_the_cli_refuses_grants_that_do_not_fit_the_face(tmp_path: Path, args: list[str], message: str) -> None:
    from click.testing import CliRunner

    from engram_index.cli import main

    result = CliRunner().invoke(main, ["keys", "create", *args, "--data", str(tmp_path)])
    assert result.exit_code == 2 and message in result.output


def test_a_remembered_key_is_refused_once_revoked_from_another_process(tmp_path: Path) -> None:
    import subprocess
    import sys

    serving = KeyStore(tmp_path)
    token, record = serving.create("kindgi", {"tenant": "t"})
    for _ in range(3):  # found, then remembered
        assert serving.lookup("kindgi", token)[0] is KeyState.VALID
    subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; from engram_index.keys import KeyStore;"
                    " KeyStore(Path(sys.argv[1])).revoke(sys.argv[2])", str(tmp_path), record.id], check=True)
    assert serving.lookup("kindgi", token)[0] is KeyState.REVOKED


def test_a_key_revoked_through_the_same_store_is_refused_at_once(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    token, record = store.create("supermemory", {})
    assert store.lookup("supermemory", token)[0] is KeyState.VALID
    store.revoke(record.id)  # its own connection: its data_version does not move
    assert store.lookup("supermemory", token)[0] is KeyState.REVOKED
    assert store.lookup("kindgi", token) == (KeyState.UNKNOWN, None)


def test_a_remembered_key_still_expires(tmp_path: Path) -> None:
    import time

    store = KeyStore(tmp_path)
    token, _ = store.create("kindgi", {"tenant": "t"}, expires_ms=int(time.time() * 1000) + 300)
    assert store.lookup("kindgi", token)[0] is KeyState.VALID
    time.sleep(0.4)
    assert store.lookup("kindgi", token)[0] is KeyState.EXPIRED


def test_a_key_remembered_by_one_thread_is_refused_by_every_thread_once_revoked(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    store = KeyStore(tmp_path)
    token, record = store.create("kindgi", {"tenant": "t"})
    with ThreadPoolExecutor(1) as other:
        assert other.submit(store.lookup, "kindgi", token).result()[0] is KeyState.VALID
        store.revoke(record.id)  # this thread's connection; the other thread's sees the change
        assert other.submit(store.lookup, "kindgi", token).result()[0] is KeyState.REVOKED


def test_listing_the_keys_keeps_the_keys_this_thread_found_remembered(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    token, _ = store.create("kindgi", {"tenant": "t"})
    assert store.lookup("kindgi", token)[0] is KeyState.VALID
    store.list()  # a read: nothing changed, so nothing is forgotten
    reads = _count_reads(store)
    assert store.lookup("kindgi", token)[0] is KeyState.VALID
    assert reads == []


def test_minting_a_key_through_the_same_store_forgets_the_keys_this_thread_found(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    token, _ = store.create("kindgi", {"tenant": "t"})
    assert store.lookup("kindgi", token)[0] is KeyState.VALID
    store.create("supermemory", {})  # a write on this thread's own connection
    reads = _count_reads(store)
    assert store.lookup("kindgi", token)[0] is KeyState.VALID
    assert len(reads) == 1 and reads[0].startswith("SELECT")


def _count_reads(store: KeyStore) -> list[str]:
    """The statements the store reads from now on (a list that fills as it reads)."""
    reads: list[str] = []
    real = store._rows

    def counted(sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        reads.append(sql)
        return real(sql, params)

    store._rows = counted  # type: ignore[method-assign]
    return reads
