"""The JSON Schema of the command interface, from the msgspec types themselves."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from casino import commands as c


def command_schema() -> dict[str, Any]:
    """Schemas of every command, by service, and of the reply."""
    (coup, wager, book, shoe, reply), components = msgspec.json.schema_components(
        [c.CoupCommand, c.WagerCommand, c.BookCommand, c.ShoeCommand, c.Reply], ref_template="#/$defs/{name}")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "coup engine command interface",
        "subjects": {
            "casino.cmd.<table>.coup": "dealer-policy service",
            "casino.cmd.<table>.wager": "wager service",
            "casino.cmd.<table>.book": "wager service (called by dealer-policy)",
            "casino.cmd.<table>.shoe": "shoe service (called by dealer-policy)",
        },
        "commands": {"coup": coup, "wager": wager, "book": book, "shoe": shoe},
        "reply": reply,
        "$defs": components,
    }


def render() -> str:
    return json.dumps(command_schema(), indent=2, sort_keys=True) + "\n"
