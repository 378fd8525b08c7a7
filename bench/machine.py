"""The machine a benchmark ran on, printed by every bench: speed figures are only comparable within one."""

from __future__ import annotations

import os
import platform
import subprocess


def cpu_model() -> str:
    """The CPU's model name as `lscpu` gives it, with its widest vector instructions (`vector_level`)."""
    return f"{_model_name()} ({vector_level()})"


def vector_level() -> str:
    """The widest vector instructions the CPU has of those the kernels choose between: one model name
    covers CPUs with and without AVX-512, and their figures differ."""
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith(("flags", "Features")):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        return "vector instructions unknown"
    if "avx512f" in flags:
        extra = [name for flag, name in (("avx512_vpopcntdq", "VPOPCNTDQ"), ("avx512_fp16", "FP16")) if flag in flags]
        return " ".join(["AVX-512", *extra])
    if "avx2" in flags:
        return "AVX2"
    if "asimd" in flags:
        return "NEON"
    return "no AVX2"


def _model_name() -> str:
    """The CPU's model name as `lscpu` gives it (from /proc/cpuinfo when lscpu is missing)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        out = ""
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_line() -> str:
    """One line naming the CPU model, the cores this process may use, and Python."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"machine: {cpu_model()}, {cores} cores usable, Python {platform.python_version()}"


def print_machine() -> None:
    """Print `machine_line()` (first, so that every result below it is read against it)."""
    print(machine_line(), flush=True)


if __name__ == "__main__":
    print_machine()
