"""`engram-index dev-network` (make try-members): members only, fully local. Run as a user runs it,
in its own process; the curl line it prints works as printed, and the same request without its
headers is refused."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from engram_index.cli import main
from engram_index.testkit.serve import free_port, wait_answering

SPACE = "at://did:plc:demo2demo2demo2demo2demo/space/garden.engram.space/demo"
DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo-space.jsonl"
MINILM = ["--model", "all-MiniLM-L6-v2", "--model-digest",
          "sha256:53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db", "--dims", "384"]


def curl_args(line: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """The URL, the query parameters and the headers of a printed `curl --get` line."""
    words = shlex.split(line)
    url, params, headers = "", {}, {}
    i = 1
    while i < len(words):
        if words[i] == "--data-urlencode":
            name, _, value = words[i + 1].partition("=")
            params[name] = value
            i += 2
        elif words[i] == "-H":
            name, _, value = words[i + 1].partition(": ")
            headers[name] = value
            i += 2
        elif words[i].startswith("http"):
            url = words[i]
            i += 1
        else:
            i += 1
    return url, params, headers


@pytest.mark.slow
def test_dev_network_serves_members_only_and_prints_a_working_request(tmp_path: Path) -> None:
    data = tmp_path / "data-members"
    imported = CliRunner().invoke(main, ["import", SPACE, str(DEMO), "--data", str(data), *MINILM])
    assert imported.exit_code == 0, imported.output
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1] / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "engram_index.cli", "dev-network", "--data", str(data), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = ""
        while not line.startswith("curl "):
            line = proc.stdout.readline()
            assert line, "dev-network stopped before printing a request"
        url, params, headers = curl_args(line)
        wait_answering(f"http://127.0.0.1:{port}", 60, poll_s=0.1, what="the service")
        answered = httpx.get(url, params=params, headers=headers, timeout=30)
        assert answered.status_code == 200, answered.text
        assert answered.json()["memories"] and params["space"] == SPACE
        refused = httpx.get(url, params=params)
        assert (refused.status_code, refused.json()["error"]) == (401, "AuthRequired")
        if shutil.which("curl"):  # the line itself, as a user pastes it
            out = subprocess.run(line, shell=True, capture_output=True, text=True, timeout=60)
            assert out.returncode == 0 and '"memories":[{' in out.stdout, out.stdout + out.stderr
    finally:
        proc.terminate()
        proc.wait(30)
    assert list((data / "dev-authorities").iterdir()), "the authority's key is kept for dev-credential"
