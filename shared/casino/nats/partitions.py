"""Tables in partitions, for instances that share the work.

The server maps every command subject, as it is published, to one of
``PARTITIONS`` partitions by a hash of the table (the casino account's
subject mappings: ``casino.cmd.T1.coup`` is delivered on
``casino.cmd.T1.coup.<p>``); an instance of a service subscribes to the
partitions it owns (``services.ownership``), so each table's commands reach
one instance of each service. A publisher never chooses the partition: a
terminal's import, a supervisor's and the dealer-policy's publications are
all mapped by the server (whose permissions are checked on the mapped
subject: casino.nats.permissions grants the partitions' subjects).

``partition`` is the server's own function (FNV-1a, 32 bits, of the table's
token, modulo ``PARTITIONS``): a test checks the two agree on a live server.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from casino.store import subjects

PARTITIONS = 16  # at most this many instances of a service share the tables; more stand by
KINDS = ("coup", "wager", "book", "shoe", "read", "shuffler")  # the command subjects' last token, besides a supervisor's


def partition(table: str) -> int:
    """The partition the server maps ``table``'s commands to."""
    h = 0x811C9DC5
    for byte in table.encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h % PARTITIONS


def within(tables: Iterable[str], parts: set[int]) -> list[str]:
    """The ``tables`` whose partitions are among ``parts``."""
    return [table for table in tables if partition(table) in parts]


def mappings() -> dict[str, str]:
    """The casino account's subject mappings (nats-server configuration)."""
    out = {f"{subjects.COMMANDS}.*.{kind}": f"{subjects.COMMANDS}.{{{{wildcard(1)}}}}.{kind}."
           f"{{{{partition({PARTITIONS},1)}}}}" for kind in KINDS}
    out[f"{subjects.COMMANDS}.*.supervise.*"] = (f"{subjects.COMMANDS}.{{{{wildcard(1)}}}}.supervise."
                                                 f"{{{{wildcard(2)}}}}.{{{{partition({PARTITIONS},1)}}}}")
    return out


def server_mappings() -> str:
    """``mappings`` as a nats-server configuration's top level (the global account's)."""
    return "mappings " + json.dumps(mappings()) + "\n"


def mapped(subject: str) -> str:
    """``subject`` as the server delivers it: what a publisher's permission must allow."""
    return f"{subject}.*"


def owned(kind: str, part: int | str) -> str:
    """What the owner of partition ``part`` subscribes to for commands of ``kind``
    (``supervise``: every supervisor's subject)."""
    if kind == "supervise":
        return f"{subjects.COMMANDS}.*.supervise.*.{part}"
    return f"{subjects.COMMANDS}.*.{kind}.{part}"
