"""Subjects of the event store and of the command interface.

Events:   casino.ev.<table>.<shoe>.<coup>.<aggregate>
  one coup, from every service:   casino.ev.*.*.<coup>.>
  one table's whole history:      casino.ev.<table>.>
  one shoe:                       casino.ev.<table>.<shoe>.>
  (shoe events between coups use "-" for the coup; a coup is filed under the shoe
  in play when it opened.)
Commands: casino.cmd.<table>.<service>  (request/reply)
Secrets:  casino.secret.<table>.<shoe>  (the shoe service's shuffled orders, kept
  apart from the public stream until the shoe ends and its order is revealed)
Archive:  casino.archive.<table>.<shoe>  (each ended shoe sealed, once: casino.audit.archive)
"""

from __future__ import annotations

from functools import lru_cache

EVENTS = "casino.ev"
COMMANDS = "casino.cmd"
SECRETS = "casino.secret"
ARCHIVE = "casino.archive"
NO_COUP = "-"


def event(table: str, shoe: str, coup: str, aggregate: str) -> str:
    return f"{EVENTS}.{table}.{shoe or NO_COUP}.{coup or NO_COUP}.{aggregate}"


def shoe_id(table: str, n: int) -> str:
    """The table's n-th shoe, as the shoe service names its shoes: 1, 2, ... in turn."""
    return f"{table}-shoe-{n}"


def shoe_number(table: str, shoe: str) -> int | None:
    """``n`` of ``shoe_id(table, n)``; None for a name of another form."""
    n = shoe.removeprefix(f"{table}-shoe-")
    return int(n) if n != shoe and n.isdigit() else None


def table_of_shoe(shoe: str) -> str:
    """The table of a shoe named as ``shoe_id`` names them."""
    return shoe.rsplit("-shoe-", 1)[0]


def table_of_coup(coup: str) -> str:
    """The table of a coup named as the dealer-policy names them
    (``<table>-<number>``), else a wildcard for any table."""
    table, _, number = coup.rpartition("-")
    return table if table and number.isdigit() else "*"


def coup_number(coup: str) -> int | None:
    """The number of a coup named as the dealer-policy names them; None for another form."""
    number = coup.rpartition("-")[2]
    return int(number) if number.isdigit() else None


def coup_filter(coup: str, table: str = "*", shoe: str = "*") -> str:
    """Every event of one coup; name its table and shoe where they are known:
    the server matches every table and shoe under a wildcard before the
    coup's own token, as many as the stream has ever held."""
    return f"{EVENTS}.{table}.{shoe}.{coup}.>"


def table_filter(table: str) -> str:
    return f"{EVENTS}.{table}.>"


def shoe_filter(table: str, shoe: str) -> str:
    return f"{EVENTS}.{table}.{shoe}.>"


def aggregate_filter(aggregate: str, table: str = "*") -> str:
    """Every event of one aggregate kind (``coup``, ``shoe``, ``wager``, ``settle``)."""
    return f"{EVENTS}.{table}.*.*.{aggregate}"


def command(table: str, service: str) -> str:
    return f"{COMMANDS}.{table}.{service}"


def supervise(table: str, supervisor: str) -> str:
    """Where supervisor ``supervisor`` directs at ``table``: only that
    supervisor's credential may publish there (casino.nats.permissions), so
    the subject names who directs."""
    return f"{COMMANDS}.{table}.supervise.{supervisor}"


def secret(table: str, shoe: str) -> str:
    return f"{SECRETS}.{table}.{shoe}"


def sealed(table: str, shoe: str) -> str:
    """Where the archive keeps the seal of one shoe."""
    return f"{ARCHIVE}.{table}.{shoe}"


def sealed_filter(table: str = "*") -> str:
    """Every seal of one table (of every table by default)."""
    return f"{ARCHIVE}.{table}.*"


def matches(filter_: str, subject: str) -> bool:
    """NATS subject matching: ``*`` one token, ``>`` the rest."""
    f, s = filter_.split("."), subject.split(".")
    for i, token in enumerate(f):
        if token == ">":
            return len(s) > i
        if i >= len(s) or (token != "*" and token != s[i]):
            return False
    return len(f) == len(s)


@lru_cache(maxsize=4096)  # a coup's few subjects come back with each of its messages
def tokens(subject: str) -> tuple[str, str, str, str]:
    """(table, shoe, coup, aggregate) of an event subject."""
    _, _, table, shoe, coup, aggregate = subject.split(".")
    return table, shoe, coup, aggregate
