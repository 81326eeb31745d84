"""The documented command schema is the one the code decodes."""

from __future__ import annotations

from pathlib import Path

from casino.schema import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "command-interface.schema.json"


def test_the_committed_command_schema_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == render(), "regenerate: .venv/bin/casino schema > " + str(DOC)
