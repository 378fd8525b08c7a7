"""The machine a benchmark ran on, printed by every bench: speed figures are only comparable within one."""

from __future__ import annotations

import os
import platform
import subprocess


def cpu_model() -> str:
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
