"""The casino's tables: which ruleset each deals, and the approvals in force.

A TOML file the operator keeps (``k8s/base/config/tables.toml`` is an example)::

    [tables.BAC1]
    ruleset = "baccarat-000-methods"
    approvals = [{ what = "method_b", by = "inspector", reference = "INS-2026-114" }]
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Annotated, Literal

import msgspec

from casino.rules.baccarat.messages import Approval

Supervisor = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{1,64}$")]


# Where a table's cards come from (TableConfig.source): "" the shoe service's
# own shuffle; a card-reading shoe's, shuffled by a "recognised" machine or by "hand".
Source = Literal["", "recognised", "hand"]


class TableConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    ruleset: str
    procedure: str = ""
    approvals: tuple[Approval, ...] = ()
    # The ISO 4217 code of the currency the table's money is in (its minor unit: a hundredth);
    # empty where the tables file names none (amounts are then shown without a code).
    currency: Annotated[str, msgspec.Meta(pattern=r"^([A-Z]{3})?$")] = ""
    # The casino's roster of supervisors (the tables file's ``supervisors``), as each table holds it:
    # recorded with every coup, and a direction from a name not on it is refused.
    supervisors: tuple[Supervisor, ...] = ()
    # How the table's cards come (docs/readers.md): "shuffled" (the shoe service shuffles and deals:
    # an electronic table) or "read" (a card-reading shoe reports each card), whose ``shuffle`` is
    # "recognised" (a shuffling machine reports the order it made) or "hand" (no order is known).
    cards: Literal["shuffled", "read"] = "shuffled"
    shuffle: Literal["recognised", "hand"] = "recognised"

    @property
    def source(self) -> Source:
        """Where the shoe's order comes from: "" the shoe service's own shuffle, else the read table's shuffle."""
        return "" if self.cards == "shuffled" else self.shuffle


class Tables(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    tables: dict[str, TableConfig]
    # The supervisors who may direct what only a supervisor may (casino.nats.permissions gives each a user).
    supervisors: tuple[Supervisor, ...] = ()


def load_tables(path: str | Path) -> dict[str, TableConfig]:
    """Read and validate a tables file; a bad file is refused naming the
    field. Each table holds the casino's roster of supervisors."""
    data = msgspec.convert(tomllib.loads(Path(path).read_text(encoding="utf-8")), Tables)
    return {name: msgspec.structs.replace(t, supervisors=t.supervisors or data.supervisors)
            for name, t in data.tables.items()}


def dump_tables(tables: dict[str, TableConfig]) -> str:
    """The TOML text of a tables file."""
    lines = []
    for name, t in tables.items():
        lines.append(f"[tables.{name}]")
        lines.append(f'ruleset = "{t.ruleset}"')
        if t.procedure:
            lines.append(f'procedure = "{t.procedure}"')
        if t.currency:
            lines.append(f'currency = "{t.currency}"')
        if t.cards != "shuffled":
            lines.append(f'cards = "{t.cards}"')
            lines.append(f'shuffle = "{t.shuffle}"')
        if t.supervisors:
            lines.append(f"supervisors = {json.dumps(list(t.supervisors))}")
        if t.approvals:
            items = ", ".join("{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in msgspec.structs.asdict(a).items()
                                               if v or k in ("what", "by")) + " }" for a in t.approvals)
            lines.append(f"approvals = [{items}]")
        lines.append("")
    return "\n".join(lines)
