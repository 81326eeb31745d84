"""What a benchmark run was measured on: the commit (and whether the working
tree differed from it), the machine's cores, processor and memory, the Python
and the nats-server, and when. Figures from two runs compare only beside
these."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from casino.nats.server import binary

REPOSITORY = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=REPOSITORY, capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def _proc_field(path: str, name: str) -> str | None:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith(name)), None)


def provenance() -> dict[str, Any]:
    commit = _git("rev-parse", "HEAD")
    changed = _git("status", "--porcelain", "--untracked-files=no")
    memory = _proc_field("/proc/meminfo", "MemTotal")
    server = subprocess.run([binary(), "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    return {
        "commit": commit,
        "working_tree_changed": None if changed is None else bool(changed),
        "started_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "processor": _proc_field("/proc/cpuinfo", "model name") or platform.processor() or platform.machine(),
        "memory_gib": round(int(memory.split()[0]) / 2**20, 1) if memory else None,
        "python": platform.python_version(),
        "nats_server": server.removeprefix("nats-server: "),
    }


def describe(p: dict[str, Any]) -> str:
    """One line for the printed table."""
    commit = (p["commit"] or "no git checkout")[:12] + (" with changes" if p["working_tree_changed"] else "")
    return (f"measured on {commit}, {p['started_utc']}: {p['cpus']} cores ({p['processor']}), "
            f"{p['memory_gib']} GiB, Python {p['python']}, nats-server {p['nats_server']}")
