"""The casino as separate processes, with a hand on each one's power switch."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import msgspec

from casino.cli.run import TABLES_FILE
from casino.config.tables import TableConfig, dump_tables
from casino.rules import incidents, settlement
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.blackjack import messages as blackjack_messages
from casino.store import subjects
from casino.store.envelope import CoupConfigured
from casino.store.eventstore import Stored

SERVICES = ("shoe", "wager", "dealer_policy", "settlement")


class Processes:
    """The four services, ``replicas`` processes of each, any of which can be
    killed and started again."""

    def __init__(self, url: str, var: Path, tables: dict[str, TableConfig], replicas: int = 1) -> None:
        self.url, self.var, self.replicas = url, var, replicas
        var.mkdir(parents=True, exist_ok=True)
        self.tables_file = var / "tables.toml"
        self.tables_file.write_text(dump_tables(tables))
        self.procs: dict[tuple[str, int], subprocess.Popen[bytes]] = {}
        self.kills: Counter[str] = Counter()

    def start(self, service: str, instance: int = 0) -> None:
        cmd = [sys.executable, "-m", f"services.{service}", "--nats", self.url]
        if service in TABLES_FILE:
            cmd += ["--tables", str(self.tables_file)]
        with (self.var / f"{service}-{instance}.log").open("ab") as log:
            self.procs[service, instance] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                                             start_new_session=True)

    def pids(self) -> dict[str, int]:
        """Each process's id by service, the second instance's and after as ``<service>-<n>``."""
        return {service if not n else f"{service}-{n + 1}": p.pid for (service, n), p in self.procs.items()}

    def start_all(self) -> None:
        for s in SERVICES:
            for instance in range(self.replicas):
                self.start(s, instance)

    def kill(self, service: str, instance: int = 0) -> None:
        """kill -9, as a node that loses power."""
        p = self.procs[service, instance]
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        self.kills[service] += 1

    def stop_all(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()

    async def chaos(self, kills_per_service: int, seed: int, stop: asyncio.Event,
                    services: tuple[str, ...] = SERVICES) -> None:
        """Kill a random one of ``services`` at a random moment, then start it
        again, until each has been killed ``kills_per_service`` times."""
        rnd = random.Random(seed)
        plan = [s for s in services for _ in range(kills_per_service)]
        rnd.shuffle(plan)
        for service in plan:
            await asyncio.sleep(rnd.uniform(0.3, 1.5))
            if stop.is_set():
                return
            instance = rnd.randrange(self.replicas)
            self.kill(service, instance)
            await asyncio.sleep(rnd.uniform(0.0, 0.8))
            self.start(service, instance)


async def deal_through(chaos: asyncio.Task[None], stop: asyncio.Event, deal: Callable[[], Awaitable[None]],
                       coups: int) -> int:
    """``deal`` (``coups`` more at each table) again until every planned kill
    has landed while coups were being dealt; the coups each table dealt."""
    dealt = 0
    while dealt < coups or not chaos.done():
        await deal()
        dealt += coups
    stop.set()
    await chaos
    return dealt


def audit(stored: list[Stored], tables: dict[str, TableConfig], coups_per_table: int) -> list[str]:
    """Nothing lost and nothing twice: every table's coups numbered 1..N without
    a gap, each with one result (or one supervisor's ruling that voids it) and
    one settlement, and no event id twice."""
    problems = []
    ids = Counter(e.id for m in stored for e in m.batch.events)
    problems += [f"event {i} recorded {n} times" for i, n in ids.items() if n > 1]
    numbers: dict[str, list[int]] = {t: [] for t in tables}
    per_coup: dict[str, Counter[str]] = {}
    for m in stored:
        coup = subjects.tokens(m.subject)[2]
        for e in m.batch.events:
            if isinstance(e.data, CoupConfigured):
                numbers[e.data.table].append(e.data.coup_number)
            kind = ("result" if isinstance(e.data, baccarat_messages.CoupResulted | blackjack_messages.CoupResulted)
                    or incidents.voided(e.data)
                    else "settled" if isinstance(e.data, settlement.CoupSettled) else "")
            if kind:
                per_coup.setdefault(coup, Counter())[kind] += 1
    for table, got in numbers.items():
        if sorted(got) != list(range(1, coups_per_table + 1)):
            problems.append(f"{table}: coups {sorted(got)}")
    for coup, counts in per_coup.items():
        if counts != Counter(result=1, settled=1):
            problems.append(f"{coup}: {dict(counts)}")
    return problems


__all__ = ["Processes", "audit", "msgspec"]
