"""Rulesets for the tests: a built-in ruleset with some settings changed,
written as a file beside the test, as an operator would write one."""

from __future__ import annotations

import json
import re
from pathlib import Path

from casino.config.rulesets import BUILT_IN


def ruleset_variant(folder: Path, name: str, **settings: object) -> str:
    """``name`` with each ``setting = value`` line replaced (``decks=1``,
    ``shuffler="continuous_shuffler"``); the path of the file written."""
    text = (BUILT_IN / f"{name}.toml").read_text(encoding="utf-8")
    for key, value in settings.items():
        text, found = re.subn(rf"(?m)^{key} = [^#\n]*?(?=[ \t]*(#|$))", f"{key} = {json.dumps(value)}", text)
        assert found == 1, f"{name} has no single {key} setting"
    path = folder / f"{name}-{'-'.join(f'{k}-{v}' for k, v in settings.items())}.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)
