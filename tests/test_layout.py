"""The layout's rules, read from the source: the shared core reaches no face, and no modules import in a circle.

Imports are read wherever they stand (inside functions too), so a lazy import counts.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "engram_index"
FACES = ("engram_index.engram", "engram_index.supermemory", "engram_index.kindgi")
# The shared core: the engine, the store, embedders, LLM clients, extraction and the HTTP layer.
CORE_PACKAGES = ("engine", "store", "embed", "llm", "extract")
CORE_MODULES = ("collections.py", "errors.py", "server.py", "protocol.py", "exchange.py", "connection_limits.py", "routing.py",
                "admission.py",
                "http_answers.py", "bodies.py",
                "endpoints.py",
                "keys.py", "search_pool.py", "settings.py",
                "metrics.py", "shortfall.py", "ranking.py", "context_columns.py", "bounded.py")


def module_name(path: Path) -> str:
    """The dotted name of a module file under src/."""
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, name: str | None = None) -> list[tuple[int, str]]:
    """Every module a file imports, wherever the import stands (functions too), with its line.

    `name` is the file's dotted module name (by default, from where it stands under src/).
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    name = name or module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def core_files() -> list[Path]:
    """The files of the shared core."""
    files = [p for name in CORE_PACKAGES for p in sorted((PACKAGE / name).rglob("*.py"))]
    return files + [PACKAGE / name for name in CORE_MODULES]


def import_graph() -> dict[str, set[str]]:
    """Each module of the package and the modules of the package it imports."""
    files = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        targets = set()
        for _, target in imported(path):
            # `from pkg import name` imports pkg.name when that is a module, else pkg itself.
            while target and target not in files:
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def faces_reached(graph: dict[str, set[str]], start: str) -> list[str]:
    """The import chains from `start` that end in a face's module (the shortest to each)."""
    chains, seen, queue = [], {start}, [[start]]
    while queue:
        chain = queue.pop(0)
        for target in sorted(graph.get(chain[-1], ())):
            if target in seen:
                continue
            seen.add(target)
            if target.startswith(FACES):
                chains.append(" -> ".join([*chain, target]))
            else:
                queue.append([*chain, target])
    return chains


def test_no_module_of_the_shared_core_reaches_a_face_even_through_another_module() -> None:
    graph = import_graph()
    offenders = [chain for path in core_files() for chain in faces_reached(graph, module_name(path))]
    assert offenders == []


def test_the_reach_check_follows_a_chain_through_a_module_that_is_not_a_face() -> None:
    graph = {"engram_index.protocol": {"engram_index.envelopes"}, "engram_index.envelopes": {"engram_index.kindgi.wire"}}
    assert faces_reached(graph, "engram_index.protocol") == [
        "engram_index.protocol -> engram_index.envelopes -> engram_index.kindgi.wire"]


def test_the_import_reader_sees_lazy_and_relative_imports_of_a_face(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text("def f():\n    from engram_index.kindgi import face\n\nfrom ..engram import records\n")
    names = {name for _, name in imported(source, "engram_index.embed.probe")}
    assert names == {"engram_index.kindgi.face", "engram_index.engram.records"}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every group of modules that import one another in a circle (strongly connected, more than one)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_no_modules_import_one_another_in_a_circle_type_only_and_lazy_imports_included() -> None:
    assert import_cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_circle_of_three_and_passes_a_chain() -> None:
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def sources_containing(needle: str) -> list[str]:
    """The modules of the package whose code contains `needle`."""
    return sorted(path.relative_to(SRC).as_posix() for path in PACKAGE.rglob("*.py")
                  if needle in path.read_text(encoding="utf-8"))


def test_one_body_reader_one_bearer_parse_and_one_retry_loop_serve_every_face() -> None:
    # Request bodies are read through bodies.py (declared and counted size), bearer headers parsed by
    # keys.bearer_token, and remote JSON calls retried by http_answers.call_json.
    assert sources_containing(".stream()") == []
    assert sources_containing('!= "bearer"') + sources_containing('== "bearer"') == ["engram_index/keys.py"]
    assert sources_containing("2**attempt") == ["engram_index/http_answers.py"]


CATCH_ALL = {"Exception", "BaseException", None}


def catch_all_endpoints(tree: ast.AST) -> list[str]:
    """The request handlers (async functions taking a `Request`) in a module that catch every exception
    and answer it: an endpoint wrapper turning a route's failures into responses itself."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.AsyncFunctionDef):
            continue
        if not any(arg.annotation is not None and ast.unparse(arg.annotation) == "Request" for arg in node.args.args):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Try) and any(
                    (None if h.type is None else ast.unparse(h.type)) in CATCH_ALL
                    and any(isinstance(inner, ast.Return) for inner in ast.walk(h)) for h in sub.handlers):
                found.append(node.name)
    return found


def endpoint_wrappers() -> list[str]:
    """The modules of the package with a request handler that catches every exception."""
    return sorted(path.relative_to(SRC).as_posix() for path in PACKAGE.rglob("*.py")
                  if catch_all_endpoints(ast.parse(path.read_text(encoding="utf-8"))))


def test_the_wrapper_finder_sees_a_handler_that_catches_everything_and_passes_one_that_does_not() -> None:
    wrapper = ("async def run(request: Request) -> Response:\n    try:\n        return await work(request)\n"
               "    except EngramError as exc:\n        return envelope(exc)\n    except Exception:\n"
               "        return internal()\n")
    narrow = "async def run(request: Request) -> Response:\n    try:\n        return 1\n    except KeyError:\n        return 2\n"
    reraises = ("async def run(request: Request) -> Response:\n    try:\n        return 1\n"
                "    except Exception as exc:\n        raise Invalid() from exc\n")
    assert catch_all_endpoints(ast.parse(wrapper)) == ["run"]
    assert catch_all_endpoints(ast.parse(narrow)) == catch_all_endpoints(ast.parse(reraises)) == []


def test_one_endpoint_wrapper_answers_every_faces_failures_in_its_envelope() -> None:
    # endpoints.endpoint runs every face's routes: a face hands in its Answers (envelope, 500), and a
    # second wrapper that catches a route's failures and answers them itself fails here.
    assert endpoint_wrappers() == ["engram_index/endpoints.py"]
    assert sources_containing('"request %s failed"') == ["engram_index/endpoints.py"]


MAX_MODULE_LINES = 520  # "modules under ~500 lines", with a little room


def module_lines() -> dict[str, int]:
    """Each module of the package and its number of lines."""
    return {path.relative_to(SRC).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
            for path in PACKAGE.rglob("*.py")}


def test_no_module_in_src_is_over_the_line_limit() -> None:
    over = {name: count for name, count in module_lines().items() if count > MAX_MODULE_LINES}
    assert over == {}, f"split these into modules of one concern each: {over}"


# A conflict's opening and closing lines (its "=======" middle alone could be a Markdown heading's underline).
CONFLICT_MARKERS = ("<<<<<<< ", ">>>>>>> ")
TEXT_SUFFIXES = {".py", ".md", ".c", ".h", ".pyi", ".toml", ".json", ".cfg", ".txt", ".sh", ""}


def conflict_lines(root: Path) -> list[str]:
    """Every line under root (files of text kinds, outside hidden and build folders) that is a merge-conflict marker."""
    found = []
    for path in sorted(root.rglob("*")):
        parts = path.relative_to(root).parts
        if not path.is_file() or path.suffix not in TEXT_SUFFIXES or any(
                p.startswith(".") or p in ("build", "node_modules", "__pycache__", "data") for p in parts[:-1]):
            continue
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (UnicodeDecodeError, OSError):
            continue
        found += [f"{path.relative_to(root)}:{n}" for n, line in enumerate(lines, 1) if line.startswith(CONFLICT_MARKERS)]
    return found


def test_no_file_of_the_project_holds_a_merge_conflict_marker() -> None:
    assert conflict_lines(SRC.parent) == []


def test_the_marker_finder_sees_a_conflict_left_in_a_document(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.md").write_text("# Notes\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> branch\n")
    (tmp_path / "ok.md").write_text("Title\n=======\n\nA heading underlined, not a conflict.\n")
    assert conflict_lines(tmp_path) == ["docs/notes.md:2", "docs/notes.md:6"]
