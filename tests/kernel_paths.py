"""Which kernel paths the suite ran and which it skipped (and why), for the run's summary."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import simsimd

from engram_index.engine import _kernels

# What the CPU offers, read once before any test changes simsimd's capabilities: enabling a
# capability the CPU lacks would run instructions it does not have.
SIMSIMD_CPU = dict(simsimd.get_capabilities())

# What each simsimd level needs, for the skip messages (simsimd 6.5's names for them).
SIMSIMD_NEEDS = {
    "serial": "plain C", "haswell": "x86 AVX2, FMA, F16C", "skylake": "x86 AVX-512F",
    "ice": "x86 AVX-512 VNNI, VPOPCNTDQ", "genoa": "x86 AVX-512 BF16", "sapphire": "x86 AVX-512 FP16",
    "turin": "x86 AVX-512 VP2INTERSECT", "sierra": "x86 AVX-VNNI-INT8", "neon": "Arm NEON",
    "neon_f16": "Arm NEON FP16", "neon_bf16": "Arm NEON BF16", "neon_i8": "Arm NEON dot product",
    "sve": "Arm SVE", "sve_f16": "Arm SVE FP16", "sve_bf16": "Arm SVE BF16", "sve_i8": "Arm SVE int8",
}

# Kept on each test's report (user properties travel from pytest-xdist's workers to the controller),
# so that the controller's summary counts every worker's tests.
EXERCISED, SKIPPED = "kernel path exercised", "kernel path skipped"
_exercised: dict[str, int] = {}
_skipped: dict[str, str] = {}


def exercised(node: pytest.Item, path: str) -> None:
    """Mark one test as run on a kernel path."""
    node.user_properties.append((EXERCISED, path))


def skip(node: pytest.Item, path: str, why: str) -> None:
    """Note that a kernel path could not run here, and skip the test saying so."""
    node.user_properties.append((SKIPPED, f"{path}\t{why}"))
    pytest.skip(f"{path}: {why}")


def note(report: pytest.TestReport) -> None:
    """Count the kernel path a test's setup ran on, or was skipped from (called for every report)."""
    if report.when != "setup":
        return
    for key, value in report.user_properties:
        if key == EXERCISED and report.passed:
            _exercised[str(value)] = _exercised.get(str(value), 0) + 1
        elif key == SKIPPED and report.skipped:
            path, why = str(value).split("\t", 1)
            _skipped[path] = why


def summary_lines() -> list[str]:
    """The summary: every path met, exercised (with its test count) or skipped with the reason."""
    lines = [f"  exercised  {path} ({count} tests)" for path, count in sorted(_exercised.items())]
    lines += [f"  skipped    {path}: {why}" for path, why in sorted(_skipped.items()) if path not in _exercised]
    return lines


def c_loops(node: pytest.Item, which: str) -> Iterator[str]:
    """Run the C kernels' vectorised, AVX2-scan, popcnt-scan or portable loops for one test; yield the path's name."""
    _reset_loops()
    fastest = _kernels.loops()
    try:
        if which == "portable":
            _kernels.use_portable(True)
            path = "C kernels, portable loops (scan, dots)"
        elif which == "avx2":
            # The scan's AVX2 loop, which the vectorised run leaves out where AVX-512 is there.
            _kernels.use_avx512(False)
            below = _kernels.loops()
            path = f"C kernels, vectorised loops without AVX-512 ({below['scan']} scan, {below['dot']} dots)"
            if fastest["scan"] != "avx512-vpopcntdq":
                skip(node, "C kernels, AVX2 scan beside AVX-512",
                     "this CPU has no AVX-512 VPOPCNTDQ: the vectorised run is this loop")
            if below["scan"] != "avx2":
                skip(node, "C kernels, AVX2 scan beside AVX-512", "this CPU has no AVX2")
        elif which == "popcnt":
            # The scan's scalar loop, which the vectorised run leaves out where AVX2 or AVX-512 is there.
            _kernels.use_avx512(False)
            _kernels.use_avx2(False)
            below = _kernels.loops()
            path = f"C kernels, scalar scan beside vectorised dots ({below['scan']} scan, {below['dot']} dots)"
            if fastest["scan"] == below["scan"]:
                skip(node, "C kernels, popcnt scan beside a vectorised one",
                     f"this CPU has no AVX2 or AVX-512 VPOPCNTDQ: the vectorised run is the {below['scan']} loop")
        else:
            path = f"C kernels, vectorised loops ({fastest['scan']} scan, {fastest['dot']} dots)"
            if set(fastest.values()) == {"portable"}:
                skip(node, "C kernels, vectorised loops", "this CPU runs only the portable loops (no popcnt, no AVX2/FMA/F16C)")
        exercised(node, path)
        yield path
    finally:
        _reset_loops()


def _reset_loops() -> None:
    """Every kernel back on the fastest loop the CPU runs."""
    _kernels.use_portable(False)
    _kernels.use_avx512(True)
    _kernels.use_avx2(True)


def simsimd_level(node: pytest.Item, capability: str) -> Iterator[str]:
    """Leave only one simsimd capability level enabled for one test; yield the path's name."""
    path = f"simsimd {capability}"
    if not SIMSIMD_CPU.get(capability):
        skip(node, path, f"this CPU does not have it ({SIMSIMD_NEEDS.get(capability, 'unknown instructions')})")
    others = [c for c, present in SIMSIMD_CPU.items() if present and c != "serial"]
    try:
        for name in others:
            simsimd.disable_capability(name)
        if capability != "serial":
            simsimd.enable_capability(capability)
        exercised(node, path)
        yield path
    finally:
        for name in others:
            simsimd.enable_capability(name)


def explain_path(node: pytest.Item, which: str) -> Iterator[str]:
    """Explain with the compiled explainer (ASCII and mostly-ASCII texts) or with the Python reference alone; yield the path."""
    from engram_index.engine import explain

    explain.use_native(which == "compiled")
    path = "explanations, compiled (ASCII and mostly-ASCII texts)" if which == "compiled" else "explanations, Python reference"
    exercised(node, path)
    try:
        yield path
    finally:
        explain.use_native(True)
