"""Every command documents itself: help text with an example."""

import click
import pytest
from click.testing import CliRunner

from engram_index.cli import main


def commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            out += commands(cmd, prefix + (name,))
        else:
            out.append(prefix + (name,))
    return out


@pytest.mark.parametrize("path", commands(main), ids=" ".join)
def test_every_command_has_help_with_an_example(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0
    assert "Example:" in result.output, f"{' '.join(path)} --help shows no example"


def test_every_command_is_mentioned_in_the_readme() -> None:
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for path in commands(main):
        assert f"engram-index {' '.join(path)}" in readme, path


# -- every README command, run as written ---------------------------------------------------------

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shlex  # noqa: E402
from pathlib import Path  # noqa: E402

README = Path(__file__).resolve().parents[1] / "README.md"
# Commands that serve until stopped (on port 8080) or run for minutes: each is run elsewhere.
NOT_RUN_HERE = {
    "serve": "serves until stopped; tests/test_server.py and tests/engram/api run the service",
    "eval": "minutes of SciFact; tests/test_evaluation.py runs it on a slice",
    "dev-network": "serves until stopped; tests/test_cli_dev_network.py runs it as printed",
    "mcp": "serves MCP over stdio until its client leaves; tests/console/test_mcp.py runs it over stdio",
}


def readme_commands() -> list[str]:
    """Every shell line of the README's code blocks that runs engram-index, continuations joined."""
    out = []
    for language, block in re.findall(r"^```(\w*)\n(.*?)^```", README.read_text(), flags=re.S | re.M):
        if language not in ("", "sh"):
            continue  # listings (text, json) and Python run elsewhere (tests/test_readme.py)
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if "engram-index " in line and not line.startswith("#"):
                out.append(line)
    return out


def minilm_notes(path: Path) -> None:
    """notes.jsonl as its README line expects: memories embedded with the local model, one tagged infra."""
    from engram_index.embed.base import document_text
    from engram_index.embed.local import MiniLMEmbedder
    from engram_index.engram.records import f16le

    import base64

    texts = [("The HTTPServer timeout is 30 seconds", ["infra"]), ("Our retry policy backs off twice", ["infra"]),
             ("Pasta needs salted water", ["food"])]
    with MiniLMEmbedder() as embedder:
        vectors = embedder.embed_documents([document_text("", t, tags) for t, tags in texts])
        ident = embedder.identity
    with open(path, "w") as fh:
        for (text, tags), vector in zip(texts, vectors):
            emb = {"model": ident.model, "modelDigest": ident.digest, "dims": ident.dims, "encoding": "f16le",
                   "vector": {"$bytes": base64.b64encode(f16le(vector)).rstrip(b"=").decode()}}
            fh.write(json.dumps({"text": text, "tags": tags, "createdAt": "2026-02-01T00:00:00Z", "embedding": emb}) + "\n")


def test_every_engram_index_command_of_the_readme_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engram_index.engram.identity.keys import K256, P256, PrivateKey

    monkeypatch.chdir(tmp_path)
    minilm_notes(tmp_path / "notes.jsonl")
    (tmp_path / "drafts.jsonl").write_text(json.dumps({"text": "a draft without a vector",
                                                       "createdAt": "2026-02-02T00:00:00Z"}) + "\n")
    (tmp_path / "queries.jsonl").write_text(json.dumps({"text": "retry policy"}) + "\n")
    from cryptography.hazmat.primitives import serialization

    pem = PrivateKey.generate(P256).key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption())
    (tmp_path / "authority.pem").write_bytes(pem)
    (tmp_path / "key.hex").write_text(PrivateKey.generate(K256).to_hex())
    env: dict[str, str] = {}
    ran, skipped = [], set()
    for line in readme_commands():
        assignment = re.match(r"^(\w+)=\$\((engram-index .*?)( \| tail -n 1)?\)$", line)
        words = shlex.split(assignment.group(2) if assignment else line, comments=True)
        while words and re.match(r"^\w+=", words[0]):
            words.pop(0)  # environment settings of a serve line
        command = words[1] if words[0] == "engram-index" else ""
        if command in NOT_RUN_HERE:
            skipped.add(command)
            continue
        args = [os.path.expandvars(w.replace("$VEC", env.get("VEC", "$VEC"))) for w in words[1:]]
        if args[:2] == ["keys", "revoke"]:
            args[2] = env["KEY_ID"]  # the README's id stands for one `keys create` printed
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, f"{line}\n{result.output}"
        if assignment:  # `| tail -n 1` keeps the last line (what `keys create` prints its key on)
            value = result.stdout.strip()
            env[assignment.group(1)] = value.splitlines()[-1] if assignment.group(3) else value
        if created := re.search(r"^created \w+ key (\S+)", result.stdout, flags=re.M):
            env["KEY_ID"] = created.group(1)
        ran.append(command)
    assert skipped == set(NOT_RUN_HERE), "every command not run here is in the README"
    assert {"import", "embed", "search", "dev-credential", "spaces", "repack", "keys"} <= set(ran)


def test_every_curl_request_of_the_readme_is_answered_by_make_runs_service(tmp_path: Path) -> None:
    """What `make run` serves (the demo space, imported as its Makefile line does, --insecure-open,
    the local embedder), asked every curl of the README."""
    import httpx

    from tests.limits import roomy_app, roomy_embedding
    from engram_index.embed.local import MiniLMEmbedder
    from engram_index.engram.auth import InsecureOpen
    from engram_index.testkit.serve import serving

    makefile = (README.parent / "Makefile").read_text()
    space = re.search(r"^DEMO_SPACE := (\S+)", makefile, flags=re.M).group(1)  # type: ignore[union-attr]
    minilm = shlex.split(re.search(r"^MINILM := (.*?)\n\n", makefile, flags=re.M | re.S).group(1).replace("\\\n", " "))  # type: ignore[union-attr]
    demo = README.parent / "examples" / "demo-space.jsonl"
    imported = CliRunner().invoke(main, ["import", space, str(demo), "--data", str(tmp_path), *minilm])
    assert imported.exit_code == 0, imported.output
    text = README.read_text()
    lines = re.findall(r"^curl -s ['\"](.*?)['\"]$", text, flags=re.M)
    assert len(lines) >= 5
    s_value = re.search(r"^S=(\S+)$", text, flags=re.M).group(1)  # type: ignore[union-attr]
    assert s_value == space
    app = roomy_app(tmp_path, "did:web:127.0.0.1", authenticator=InsecureOpen(),
                     embedding=roomy_embedding(MiniLMEmbedder()))
    with serving(app) as url:
        for line in lines:
            target = line.replace("$S", s_value).replace("http://127.0.0.1:8080", url)
            r = httpx.get(target, timeout=30)
            assert r.status_code == 200, f"{line}: {r.text}"
            assert "error" not in r.json()


def test_every_serve_option_is_in_the_readme() -> None:
    serve = main.commands["serve"]
    options = [name for param in serve.params for name in (*param.opts, *param.secondary_opts) if name.startswith("--")]
    text = README.read_text()
    missing = [name for name in options if f"`{name}`" not in text]
    assert len(options) > 20 and missing == [], f"document these serve options in README.md: {missing}"
