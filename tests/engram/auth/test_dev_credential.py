"""`engram-index dev-credential` prints headers that a real server accepts."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization

from engram_index.cli import main

from .network import SERVICE_DID, Network, network


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    with network(tmp_path_factory.mktemp("data")) as n:
        yield n


def test_dev_credential_headers_are_accepted_for_a_p256_pem_key(net: Network, tmp_path: Path) -> None:
    pem = tmp_path / "authority.pem"
    pem.write_bytes(net.p256.credential_key.key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    result = CliRunner().invoke(main, ["dev-credential", net.p256.space(), "--authority-key", str(pem),
                                       "--audience", SERVICE_DID, "--json"])
    assert result.exit_code == 0, result.output
    headers = json.loads(result.stdout.splitlines()[0])
    r = httpx.get(f"{net.url}/xrpc/garden.engram.searchMemories",
                  params={"space": net.p256.space(), "q": "server", "mode": "keyword"}, headers=headers)
    assert r.status_code == 200, r.text


def test_dev_credential_prints_a_curl_line_that_works_for_a_secp256k1_hex_key(net: Network, tmp_path: Path) -> None:
    hexfile = tmp_path / "authority.hex"
    hexfile.write_text(net.k256.credential_key.to_hex())
    result = subprocess.run(
        [sys.executable, "-m", "engram_index.cli", "dev-credential", net.k256.space(), "--authority-key",
         str(hexfile), "--alg", "ES256K", "--audience", SERVICE_DID, "--style", "keyed", "--url", net.url,
         "--q", "server"], capture_output=True, text=True, check=True)
    line = result.stdout.strip()
    assert line.startswith("curl ")
    out = subprocess.run(shlex.split(line), capture_output=True, text=True, check=True).stdout
    assert json.loads(out)["memories"][0]["text"] == "deploy the server"


def test_dev_credential_refuses_a_key_file_that_is_not_a_key(tmp_path: Path) -> None:
    bad = tmp_path / "k"
    bad.write_text("hello")
    result = CliRunner().invoke(main, ["dev-credential", "at://did:plc:aaaaaaaaaaaaaaaaaaaaaaaa/space/garden.engram.space/k",
                                       "--authority-key", str(bad), "--audience", SERVICE_DID])
    assert result.exit_code != 0 and "PEM" in result.output
