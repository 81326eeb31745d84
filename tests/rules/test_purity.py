"""The rules core is pure, enforced by a lint rule: prove the rule bites."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUFF = [sys.executable, "-m", "ruff"]


def lint(filename: str, source: str) -> str:
    out = subprocess.run(
        [*RUFF, "check", "--no-cache", "--output-format", "concise", "--stdin-filename", filename, "-"],
        input=source, capture_output=True, text=True, cwd=ROOT,
    )
    return out.stdout


@pytest.mark.parametrize(
    "source,code",
    [
        ("import asyncio\n", "TID251"),
        ("import random\n", "TID251"),
        ("from datetime import datetime\n", "TID251"),
        ("from time import monotonic\n", "TID251"),
        ("import os\n", "TID251"),
        ("import nats\n", "TID251"),
        ("from faststream.nats import NatsBroker\n", "TID251"),
        ("import prometheus_client\n", "TID251"),
        ("print('dealt')\n", "T201"),
        ("data = open('shoe.txt').read()\n", "PTH123"),
    ],
)
def test_io_clock_and_randomness_are_refused_inside_the_rules_core(source: str, code: str) -> None:
    assert code in lint("shared/casino/rules/probe.py", source)
    assert code not in lint("shared/casino/probe.py", source)  # the adapters may


def test_the_rules_core_passes_its_own_lint() -> None:
    out = subprocess.run([*RUFF, "check", "--no-cache", "shared/casino/rules"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout
