"""Revocations and nonces survive a restart and are shared by every process using the data directory."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engram_index.engram.auth.state import AuthState


def test_a_revocation_survives_a_restart(tmp_path: Path) -> None:
    state = AuthState(tmp_path / "auth.sqlite")
    state.revoke("did:plc:a", "j1", time.time() + 600)
    state.close()
    again = AuthState(tmp_path / "auth.sqlite")
    assert again.is_revoked("did:plc:a", "j1")
    assert not again.is_revoked("did:plc:b", "j1")  # a jti is revoked only for its own issuer


def test_a_nonce_used_by_one_process_is_a_replay_for_another(tmp_path: Path) -> None:
    first, second = AuthState(tmp_path / "auth.sqlite"), AuthState(tmp_path / "auth.sqlite")
    until = time.time() + 600
    assert first.use_nonce("did:plc:a j1", "n1", until)
    assert not second.use_nonce("did:plc:a j1", "n1", until)
    assert second.use_nonce("did:plc:a j2", "n1", until)  # nonces are per credential


def test_an_expired_nonce_may_be_used_again(tmp_path: Path) -> None:
    state = AuthState(tmp_path / "auth.sqlite")
    assert state.use_nonce("o", "n", time.time() - 1)
    assert state.use_nonce("o", "n", time.time() + 600)
    assert not state.use_nonce("o", "n", time.time() + 600)


def _reads(state: AuthState) -> list[str]:
    """The statements the state's database runs from now on (a list that fills as it runs)."""
    statements: list[str] = []
    state._db.set_trace_callback(statements.append)
    return statements


def test_a_credential_found_not_revoked_is_answered_again_without_a_read(tmp_path: Path) -> None:
    state = AuthState(tmp_path / "auth.sqlite")
    assert not state.is_revoked("did:plc:a", "j1")
    reads = _reads(state)
    assert not state.is_revoked("did:plc:a", "j1")
    assert reads == []


def test_a_remembered_credential_revoked_through_another_open_state_is_refused_at_once(tmp_path: Path) -> None:
    serving, other = AuthState(tmp_path / "auth.sqlite"), AuthState(tmp_path / "auth.sqlite")
    assert not serving.is_revoked("did:plc:a", "j1")
    other.revoke("did:plc:a", "j1", time.time() + 600)
    assert serving.is_revoked("did:plc:a", "j1")
    assert not serving.is_revoked("did:plc:a", "j2")


def test_a_remembered_credential_revoked_from_another_process_is_refused_at_once(tmp_path: Path) -> None:
    import subprocess
    import sys

    serving = AuthState(tmp_path / "auth.sqlite")
    assert not serving.is_revoked("did:plc:a", "j1")
    subprocess.run([sys.executable, "-c", "import sys, time; from pathlib import Path;"
                    " from engram_index.engram.auth.state import AuthState;"
                    " AuthState(Path(sys.argv[1])).revoke('did:plc:a', 'j1', time.time() + 600)",
                    str(tmp_path / "auth.sqlite")], check=True)
    assert serving.is_revoked("did:plc:a", "j1")


def test_a_remembered_credential_revoked_in_memory_is_refused_at_once() -> None:
    state = AuthState()
    assert not state.is_revoked("did:plc:a", "j1")
    state.revoke("did:plc:a", "j1", time.time() + 600)
    assert state.is_revoked("did:plc:a", "j1")


def test_a_revocation_written_without_the_shared_value_still_holds_after_the_remembering_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engram_index.engram.auth.state as module

    state = AuthState(tmp_path / "auth.sqlite")
    now = [1000.0]
    monkeypatch.setattr(module, "_clock", lambda: now[0])
    assert not state.is_revoked("did:plc:a", "j1")
    # A writer that stopped between its commit and the shared value (a crash): only the row is there.
    state._db.execute("INSERT INTO revoked VALUES (?, ?, ?)", ("did:plc:a", "j1", time.time() + 600))
    assert not state.is_revoked("did:plc:a", "j1")  # still believed, for at most REMEMBER_S
    now[0] += module.REMEMBER_S
    assert state.is_revoked("did:plc:a", "j1")
