"""The dealer-policy service: it opens each coup, has the wager service close
betting, makes the offers, draws cards from the table's card source, applies
the tableau or the blackjack flow, and records the result. Each command is
handled at its table by the handler its type names (``HANDLERS``), in a unit
of work (services.dealer_policy.dealing) opened with the table's lock held
and unstaged on any exit."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from casino.config.tables import TableConfig
from casino.metrics import Metrics
from casino.nats.partitions import within
from casino.protocol import commands
from casino.protocol.service import Clock, Peer, TableLocks, log, utc_now
from casino.rules.errors import RuleViolation
from casino.rules.ruleset import RulesetError
from casino.store import subjects
from casino.store.envelope import Batch
from casino.store.eventstore import EventStore, Stored
from services.dealer_policy import dealing, opening, reading
from services.dealer_policy.dealing import Dealing, Ports
from services.dealer_policy.sources import CardSource, source_of
from services.dealer_policy.table import TableCoup, follow, latest_records
from services.dealer_policy.table import copy as copy_table
from services.dealer_policy.table import fold as fold_table
from services.dealer_policy.table import new as new_table
from services.repository import Repository

# A command's handler at its table: what the command was taken as where the
# answer says more than what the table now waits for (a card-reading shoe's
# report), else None.
Handler = Callable[[Dealing, Any], Awaitable[commands.Reply | None]]


class DealerPolicyService:
    producer = "dealer-policy"

    def __init__(self, store: EventStore, peer: Peer, tables: dict[str, TableConfig], clock: Clock = utc_now) -> None:
        self.store, self.config = store, tables
        self.repository: Repository[TableCoup] = Repository(store, self.producer, fold_table, clock=clock,
                                                            copy_=copy_table)
        self.ports = Ports(store, peer, self.repository)
        self.tables: dict[str, TableCoup] = {}
        self.folding = TableLocks()
        self.resuming: dict[str, asyncio.Future[None]] = {}  # the tables being resumed
        # Where each table's cards come from, picked once (services.dealer_policy.sources).
        self.sources: dict[str, CardSource] = {name: source_of(config) for name, config in tables.items()}
        self.handlers: dict[type, Handler] = {
            commands.OpenCoup: opening.open_coup, commands.CardRead: reading.report,
            commands.CutCardRead: reading.report, commands.Rule: reading.rule, commands.KeyCard: reading.key,
            commands.ReopenTable: reading.reopen, commands.Status: self._status}

    @property
    def peer(self) -> Peer:
        return self.ports.peer

    @peer.setter
    def peer(self, peer: Peer) -> None:
        self.ports.peer = peer

    @property
    def metrics(self) -> Metrics | None:
        return self.ports.metrics

    @metrics.setter
    def metrics(self, metrics: Metrics | None) -> None:
        self.ports.metrics = metrics

    # ---- state ----------------------------------------------------------

    def new_table(self, name: str) -> TableCoup:
        if name not in self.config:
            raise RuleViolation("tables", f"table {name} is not configured")
        t = new_table(name, self.config[name], self.sources[name])
        if self.metrics is not None:
            t.cards.watched(self.metrics, name)
        return t

    async def rebuild(self, table: str | None = None) -> None:
        """Fold each table's latest coup. Nothing earlier decides anything: the
        next coup's number, the shoe holder (000 8.18) and the style in force
        (001 8.5: every coup of a style ruleset is dealt in a style) come from
        it. So taking a table reads one coup however long the history."""
        for name in [table] if table else list(self.config):
            async with self.folding(name):
                try:
                    await self._rebuild(name)
                except RulesetError as exc:  # the other tables deal; this one's commands are refused with it
                    log.error("table %s: %s", name, exc)

    async def _rebuild(self, name: str) -> None:
        """``rebuild`` of one table, its lock held. The table is replaced only
        once it is folded: a read that fails leaves the table as it was, never
        as a table that has dealt nothing (which would open coup 1 again)."""
        t = self.new_table(name)
        t.number, latest = await latest_records(self.store, name)
        for msg in latest:
            follow(self.repository, t, msg)
        if latest and not t.coup:  # the latest is a stray under a coup of no number of ours: the table's coups, whole
            t = self.new_table(name)
            for msg in await self.store.read(subjects.aggregate_filter("coup", name)):
                follow(self.repository, t, msg)
        self.tables[name] = t

    async def _held(self, name: str) -> TableCoup:
        """The table as held, folded from its latest coup where it is not held
        yet (its lock held)."""
        if name not in self.tables:
            await self._rebuild(name)
        return self.tables[name]

    async def reload(self, cmd: commands.CoupCommand) -> None:
        """Catch up with what other instances appended since we last looked."""
        async with self.folding(cmd.table):
            if (t := self.tables.get(cmd.table)) is not None:
                await Dealing(self.ports, t).caught_up()

    async def observe(self, subject: str, seq: int, batch: Batch) -> None:
        """Follow the stream: apply what another instance appended."""
        table = subjects.tokens(subject)[0]
        async with self.folding(table):
            if (t := self.tables.get(table)) is not None:
                follow(self.repository, t, Stored(seq, subject, batch))

    @contextlib.asynccontextmanager
    async def working(self, name: str, afresh: bool = False) -> AsyncIterator[Dealing]:
        """The unit of work of table ``name``, its lock held throughout (the
        table folded first where it is not held yet; ``afresh``: folded anew
        from the record), so that a decision is never taken on one coup and
        recorded on the next: another instance's write meanwhile fails the
        append's guard. Whatever is staged and not recorded on any exit is
        unstaged: it did not happen."""
        async with self.folding(name):
            if afresh:
                self.tables.pop(name, None)
            t = await self._held(name)
            try:
                yield Dealing(self.ports, t)
            finally:
                self.repository.unstage(t)

    # ---- commands -------------------------------------------------------

    async def handle(self, cmd: commands.PolicyCommand) -> commands.Reply:
        if (name := getattr(cmd, "supervisor", "")) and (roster := self.config.get(cmd.table)) is not None and \
                roster.supervisors and name not in roster.supervisors:
            raise RuleViolation("roster", f"{name} is not on the casino's roster of supervisors "
                                f"({', '.join(roster.supervisors)}): a direction is taken from a supervisor on it")
        async with self.working(cmd.table) as w:
            taken = await self.handlers.get(type(cmd), dealing.play)(w, cmd)
            await reading.shuffled(w)
            # The device is told what its report was taken as (the cut card first in a round: reshuffle now).
            return w.reply() if taken is None else reading.answered(taken, w.reply())

    async def _status(self, w: Dealing, cmd: commands.Status) -> None:
        """What the table waits for, the latest coup as the record has it
        (whichever instance opened it); the dealer's own step, left half-taken
        (its instance stopped, or the table moved between instances as it
        stepped), taken now, beside the answer."""
        await w.caught_up()
        await reading.shuffled(w)
        if w.t.state is not None and w.waiting().kind in ("card", "pass"):
            self._resume_later([w.t.name])

    async def finish_rounds(self) -> None:
        """On stopping: wait for the rounds' ends still being asked (what does
        not finish is asked again by the next coup, or on resuming)."""
        pending = [t.ending for t in self.tables.values() if t.ending is not None and not t.ending.done()]
        if pending:
            await asyncio.wait(pending, timeout=10)

    def take(self, parts: set[int]) -> None:
        """Own the tables of partitions ``parts`` (services.ownership), let go
        of first: any step a coup was left in the middle of (its owner stopped
        or killed) is finished, beside the commands that come meanwhile (each
        table's in turn)."""
        self._resume_later(within(self.config, parts))

    def _resume_later(self, names: Iterable[str]) -> None:
        """Resume the tables ``names`` in the background, each once at a time."""
        for name in names:
            if name not in self.resuming:
                self.resuming[name] = task = asyncio.ensure_future(self.resume([name]))
                task.add_done_callback(functools.partial(self._resumed, name))

    def _resumed(self, name: str, _: asyncio.Future[None]) -> None:
        del self.resuming[name]

    def let_go(self, parts: set[int]) -> None:
        """Hold the tables of partitions ``parts`` no more (services.ownership):
        another instance owns them, or this one takes them and folds each
        afresh from its latest coup."""
        for name in within(self.tables, parts):
            t = self.tables.pop(name)
            if self.metrics is not None:
                with contextlib.suppress(KeyError):  # another instance's now
                    t.cards.let_go(self.metrics, name)

    async def resume(self, names: Iterable[str]) -> None:
        """Finish every step a coup of the tables ``names`` was in the middle
        of, each table folded afresh from the record: what another instance
        wrote as the table moved may have taken the step already."""
        for name in names:
            try:
                async with self.working(name, afresh=True) as w:
                    await _resume(w)
            except Exception as exc:  # refused, or the server away: the table's next command finds it there
                log.error("table %s: cannot resume its coup: %s: %s", name, type(exc).__name__, exc)


async def _resume(w: Dealing) -> None:
    t = w.t
    if t.state is None or t.stopped:  # nothing is dealt in a held or void coup; the next opening ends its round
        return
    if t.finished:  # its round's end asked again (the shoe answers one ended already as done)
        w.ask_end_round()
        return
    await w.ask_shoe(commands.StartRound(f"{t.coup}:start", t.name, t.coup, t.config.ruleset))
    if t.state.phase != "betting":  # in betting, the terminal's own steps come next
        await w.advance()
