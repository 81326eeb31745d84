"""Appends and requests a coup, by table kind (baccarat and blackjack,
shuffled and card-reading): the durable steps a coup takes, which the write
path's cost follows. Four tables (baccarat 000 and blackjack 002, the last
two card-reading) deal ``coups`` coups each through the four services as
processes on one local nats-server, the simulated players choosing as they
do in ``casino run``; then every message of the event stream is counted by
its table, and every request the terminals, the devices and the services
sent is counted from a tap on ``casino.cmd.>``.

``appends`` a coup leaves out what grows with the players rather than the
coup, as docs/benchmarks.md counts it: the wager book's messages (its
opening and closing too: ``by_aggregate`` shows them), one append for each player's own step (``STEPS``: a decision, an
offer answered, a hand exposed, cards passed or returned, a shoe given up, a
breach reported) and, at a card-reading table, one for each card its shoe
reported. ``messages`` is every append, and ``requests`` every request, by
the service asked (``coup``, ``wager``, ``read`` and ``shuffler`` from the
table; ``shoe`` and ``book`` from the dealer-policy).

``python -m bench.appends [--coups N] [--seed S]``"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import Counter, defaultdict
from typing import Any

import msgspec
from nats.aio.msg import Msg

from bench.load import casino
from casino.cli.run import default_tables
from casino.cli.simulator import Simulator
from casino.config.tables import TableConfig
from casino.store import envelope, subjects
from casino.store.eventstore import Stored
from casino.store.jetstream import JetStreamEventStore

RULESETS = ["baccarat-000-methods", "blackjack-002-hole-card"]
# Each kind's appends a coup on c7b9234 (before issue 76's write path), counted by this module, one run of 30
# coups a table, seed 4: the baseline ``make bench`` prints each figure beside.
BASELINE = {"baccarat shuffled": 5.10, "blackjack shuffled": 10.17, "baccarat read": 9.97, "blackjack read": 14.13}
MOST = 3.0  # the target: at most this many a coup, at every kind
# A player's own steps, each one append whatever the design (a terminal's command that the coup records).
STEPS = frozenset({"table.decide", "table.answer_offer", "table.expose_hand", "table.return_cards",
                   "table.pass_shoe", "table.forfeit_shoe", "table.report_handling_breach"})


class Typed(msgspec.Struct):
    type: str = ""
    id: str = ""


class Tap:
    """Every request sent to a table's service, counted by table, by the
    service asked and the player's own steps among them."""

    def __init__(self) -> None:
        self.by_service: dict[str, Counter[str]] = defaultdict(Counter)
        self.steps: dict[str, set[str]] = defaultdict(set)  # each step's command id: asked again, one step
        self._decoder = msgspec.json.Decoder(Typed)

    async def on(self, msg: Msg) -> None:
        tokens = msg.subject.split(".")  # as the server maps it: the table's partition added
        table, service = tokens[2], tokens[3]
        self.by_service[table][service] += 1
        try:
            command = self._decoder.decode(msg.data)
        except msgspec.DecodeError:
            return
        if command.type in STEPS:
            self.steps[table].add(command.id)


def kind_of(config: TableConfig) -> str:
    game = "baccarat" if config.ruleset.startswith("baccarat") else "blackjack"
    return f"{game} {'read' if config.cards == 'read' else 'shuffled'}"


def counted(tables: dict[str, TableConfig], history: list[Stored], tap: Tap, coups: int) -> dict[str, Any]:
    """Each table kind's appends, messages and requests a coup."""
    messages: Counter[str] = Counter()
    reports: dict[str, set[str]] = defaultdict(set)
    by_aggregate: dict[str, Counter[str]] = defaultdict(Counter)
    for m in history:
        table, _, _, aggregate = subjects.tokens(m.subject)
        if table not in tables:
            continue
        messages[table] += 1
        by_aggregate[table][aggregate] += 1
        reports[table] |= {e.causation for e in m.batch.events if e.causation.startswith(envelope.READ)}
    out: dict[str, Any] = {}
    for table, config in tables.items():
        wagers, steps, cards = by_aggregate[table]["wager"], len(tap.steps[table]), len(reports[table])
        net = messages[table] - wagers - steps - cards
        out[kind_of(config)] = {
            "table": table,
            "appends": round(net / coups, 2),
            "messages": round(messages[table] / coups, 2),
            "by_aggregate": {k: round(v / coups, 2) for k, v in sorted(by_aggregate[table].items())},
            "left_out": {"wagers": round(wagers / coups, 2), "steps": round(steps / coups, 2),
                         "cards_reported": round(cards / coups, 2)},
            "requests": round(sum(tap.by_service[table].values()) / coups, 2),
            "requests_by_service": {k: round(v / coups, 2) for k, v in sorted(tap.by_service[table].items())},
        }
    return out


async def measure(coups: int = 30, seed: int = 4) -> dict[str, Any]:
    tables = default_tables(4, RULESETS, readers=2)
    async with casino(tables) as (nc, _procs, _server):
        tap = Tap()
        sub = await nc.subscribe(f"{subjects.COMMANDS}.>", cb=tap.on)
        await Simulator(nc, tables, seed=seed, patience=40).run(coups)
        await asyncio.sleep(1.0)  # the last rounds ended at the shoe
        await sub.unsubscribe()
        history = await JetStreamEventStore(nc).read(f"{subjects.EVENTS}.>")
    return {"coups_a_table": coups, "seed": seed, "kinds": counted(tables, history, tap, coups)}


def summary(r: dict[str, Any]) -> str:
    lines = [f"appends a coup ({r['coups_a_table']} coups a table, seed {r['seed']}), against c7b9234's:",
             f"  {'table kind':20} {'appends':>8} {'c7b9234':>8} {'messages':>9} {'requests':>9}  left out a coup"]
    for kind, f in r["kinds"].items():
        left = ", ".join(f"{k} {v}" for k, v in f["left_out"].items())
        lines.append(f"  {kind:20} {f['appends']:8.2f} {BASELINE[kind]:8.2f} {f['messages']:9.2f} "
                     f"{f['requests']:9.2f}  {left}")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.appends")
    p.add_argument("--coups", type=int, default=30, help="coups a table")
    p.add_argument("--seed", type=int, default=4)
    args = p.parse_args()
    r = asyncio.run(measure(args.coups, args.seed))
    print(summary(r))
    print(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
