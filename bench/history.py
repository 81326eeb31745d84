"""History: what a table's shoe costs the nats-server per round as the
table's history grows. A table is given a history of so many coups (dealt
by the shoe service, then appended to the stream as it wrote them), and the
shoe service deals more rounds on it (start, the cards by the tableau, end),
each round's wall time and the server's CPU measured; the baseline is the
same rounds at a table with no history. A guard that matched the table's
whole history on each append made the server's work grow with it. Beside
them, what taking up the table at a service's start costs the server: its
latest coup and shoe event found in the shoe in play, against a filter over
the table's whole history."""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client
from services.shoe.secrets import JetStreamSecrets, MemorySecrets, secure_shuffle
from services.shoe.service import ShoeService

from bench.load import append_all, latency_percentiles, usage
from casino.nats.provision import provision
from casino.nats.server import NatsServer
from casino.protocol import commands
from casino.protocol.service import Recorder
from casino.rules import shoe as dealing_shoe
from casino.rules.runs import TableauRun
from casino.store import subjects
from casino.store.envelope import Batch, CoupConfigured, encode
from casino.store.eventstore import Appended, Stored, latest_at_table
from casino.store.jetstream import JetStreamEventStore

TABLE, RULESET = "BAC000", "baccarat-000-methods"


class Unchecked:
    """A store that keeps what is appended, unchecked, to be written later in
    one go: a history is dealt at the speed of the rules."""

    def __init__(self) -> None:
        self.appended: list[tuple[str, Batch, str]] = []

    async def append(self, subject: str, batch: Batch, *, expected: int, msg_id: str,
                     guard: str | None = None) -> Appended:
        self.appended.append((subject, batch, msg_id))
        return Appended(len(self.appended))

    async def read(self, filter_: str, after: int = 0, limit: int | None = None) -> list[Stored]:
        return []

    async def scan(self, filter_: str, each: Callable[[Stored], object]) -> None:
        pass

    async def scan_raw(self, filter_: str, each: Callable[[int, str, dict[str, str], bytes], object],
                       after: int = 0, limit: int | None = None) -> None:
        pass

    async def first(self, filter_: str) -> Stored | None:
        return None

    async def last(self, filter_: str) -> Stored | None:
        return None


async def deal(shoe: ShoeService, first: int, count: int, table: str = TABLE, ruleset: str = RULESET) -> list[float]:
    """Deal baccarat rounds ``first`` to ``first + count - 1`` at ``table``
    (started, drawn by the tableau, ended), what the shoe gives a coup's
    append to carry recorded as the dealer-policy records it: each one's seconds."""
    took, after = [], ""
    for n in range(first, first + count):
        coup = f"{table}-{n:06d}"
        start = time.perf_counter()
        started = await shoe.handle(commands.StartRound(id=f"{coup}:start", table=table, coup=coup, ruleset=ruleset,
                                                        after=after))
        after = await carried(shoe, started, f"{coup}:start", table, coup, after)
        drawn = await shoe.handle(commands.DrawCard(id=f"{coup}:draw", table=table, coup=coup, ruleset=ruleset, index=0,
                                             count=4, run=TableauRun(), after=after))
        after = await carried(shoe, drawn, f"{coup}:draw", table, coup, after)
        ended = await shoe.handle(commands.EndRound(id=f"{coup}:end", table=table, coup=coup, ruleset=ruleset,
                                                    pickup=drawn.cards, after=after))
        after = await carried(shoe, ended, f"{coup}:end", table, coup, after)
        if not (drawn.ok and started.ok and ended.ok):
            raise RuntimeError(f"round {coup} was refused: {drawn}")
        took.append(time.perf_counter() - start)
    return took


async def carried(shoe: ShoeService, reply: commands.Reply, step: str, table: str, coup: str, after: str) -> str:
    """What the shoe gave the coup's append to carry (``reply.carried``), recorded
    in the coup's record as the dealer-policy records it: the step the shoe is
    told next that the record holds (``after``)."""
    if not reply.carried:
        return after
    subject = subjects.event(table, reply.carried[0].shoe_id, coup, "coup")
    last = await shoe.store.last(subject)
    await Recorder(shoe.store, "dealer-policy").record(
        subject, list(reply.carried), expected=last.seq if last is not None else 0, msg_id=f"{step}:carried",
        table=table, shoe=reply.carried[0].shoe_id, coup=coup, causation=step)
    return step


async def write_history(nc: Client, coups: int) -> None:
    """``coups`` rounds at the table, across as many shoes as they take, in the
    stream as the shoe service wrote them, each with a coup message filed
    under the shoe its round started in (as the dealer-policy files a coup),
    and their shoes' orders kept."""
    store, secrets = Unchecked(), MemorySecrets()
    await deal(ShoeService(store, secrets, secure_shuffle), 1, coups)
    coups_filed = Unchecked()
    recorder = Recorder(coups_filed, "dealer-policy")
    written = []
    for subject, batch, msg_id in store.appended:
        written.append((subject, batch, msg_id))
        if any(isinstance(e.data, dealing_shoe.RoundStarted) for e in batch.events):
            _, shoe, coup, _ = subjects.tokens(subject)
            configured = CoupConfigured(TABLE, "baccarat", RULESET, "", int(coup.rsplit("-", 1)[1]))
            await recorder.record(subjects.event(TABLE, shoe, coup, "coup"), [configured], expected=0,
                                  msg_id=f"{coup}:open", table=TABLE, shoe=shoe, coup=coup, causation=f"{coup}:open")
            written.append(coups_filed.appended[-1])
    await append_all(nc, ((subject, encode(batch), {"Nats-Msg-Id": msg_id}) for subject, batch, msg_id in written))
    kept = JetStreamSecrets(nc.jetstream())
    for (table, shoe), order in secrets.orders.items():
        await kept.put(table, shoe, order)


async def one_run(history: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, NatsServer(Path(tmp) / "nats") as server:
        assert server.process is not None
        nc = await nats.connect(server.url)
        try:
            await provision(nc)
            await write_history(nc, history)
            taking_up = await take_up(JetStreamEventStore(nc), server.process.pid)
            shoe = ShoeService(JetStreamEventStore(nc), JetStreamSecrets(nc.jetstream()))
            await deal(shoe, history + 1, 20)  # the table folded, the connection warm
            before = usage(server.process.pid)[0]
            took = await deal(shoe, history + 21, rounds)
            cpu = usage(server.process.pid)[0] - before
            shoe_in_play = shoe.tables[TABLE].state.shoe_id
        finally:
            await nc.close()
    return {"history_coups": history, "rounds": rounds, **latency_percentiles(took),
            "server_cpu_ms_per_round": 1000 * cpu / rounds, "shoe_in_play": shoe_in_play, **taking_up}


async def take_up(store: JetStreamEventStore, pid: int, times: int = 20) -> dict[str, float]:
    """The server's CPU, in milliseconds, to find the table's latest coup and
    shoe event as a service taking up the table does (in the shoe in play),
    and over the table's whole history; both must find the same message."""
    out = {}
    for aggregate in ("coup", "shoe"):
        ways: dict[str, Callable[[], Awaitable[Stored | None]]] = {
            "shoe_in_play": functools.partial(latest_at_table, store, TABLE, aggregate),
            "whole_table": functools.partial(store.last, subjects.aggregate_filter(aggregate, TABLE))}
        found = set()
        for way, get in ways.items():
            latest = await get()
            found.add(latest and latest.seq)
            before = usage(pid)[0]
            for _ in range(times):
                await get()
            out[f"latest_{aggregate}_{way}_cpu_ms"] = 1000 * (usage(pid)[0] - before) / times
        if len(found) != 1:
            raise RuntimeError(f"the latest {aggregate} found two ways differs: {found}")
    return out


async def measure(history: int = 20000, rounds: int = 300, runs: int = 3) -> dict[str, Any]:
    """The rounds at a table with ``history`` coups behind it against a table
    with none; the median of ``runs`` each, alternated."""
    bare, kept = [], []
    for _ in range(runs):
        bare.append(await one_run(0, rounds))
        kept.append(await one_run(history, rounds))

    def median(results: list[dict[str, Any]]) -> dict[str, Any]:
        return {k: statistics.median(r[k] for r in results) for k in results[0] if k != "shoe_in_play"}

    with_history, baseline = median(kept), median(bare)
    return {"runs": runs, "with_history": with_history, "baseline": baseline,
            "cpu_ratio": with_history["server_cpu_ms_per_round"] / baseline["server_cpu_ms_per_round"],
            "p99_ratio": with_history["p99_ms"] / baseline["p99_ms"]}


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.history")
    p.add_argument("--coups", type=int, default=20000, help="coups of history at the table")
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--runs", type=int, default=1)
    args = p.parse_args()
    print(json.dumps(asyncio.run(measure(args.coups, args.rounds, args.runs)), indent=2))


if __name__ == "__main__":
    main()
