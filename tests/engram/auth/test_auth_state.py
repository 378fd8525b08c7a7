"""Revocations and nonces survive a restart and are shared by every process using the data directory."""

from __future__ import annotations

import time
from pathlib import Path

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
