"""The dealer-policy service's handlers: it opens each coup, has the wager
service close betting, makes the offers, draws cards from the shoe service,
applies the tableau or the blackjack flow, and records the result."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Iterable

from casino.config.tables import TableConfig
from casino.games import Coup, Step
from casino.metrics import Metrics, count_recorded
from casino.nats.partitions import within
from casino.protocol import commands
from casino.protocol.service import Clock, Peer, TableLocks, log, utc_now
from casino.rules.errors import RuleViolation
from casino.rules.ruleset import RulesetError
from casino.rules.shoe import ROUND
from casino.store import subjects
from casino.store.envelope import AnyEvent, Batch
from casino.store.eventstore import EventStore, Stored
from services.dealer_policy import booking, opening, reading
from services.dealer_policy.booking import failed, logged
from services.dealer_policy.sources import CardSource, source_of
from services.dealer_policy.table import TableCoup, before_opening, follow, hold, latest_records
from services.dealer_policy.table import copy as copy_table
from services.dealer_policy.table import fold as fold_table
from services.dealer_policy.table import new as new_table
from services.repository import Repository


class DealerPolicyService:
    producer = "dealer-policy"

    def __init__(self, store: EventStore, peer: Peer, tables: dict[str, TableConfig], clock: Clock = utc_now) -> None:
        self.store, self.peer, self.config = store, peer, tables
        self.repository: Repository[TableCoup] = Repository(store, self.producer, fold_table, clock=clock,
                                                            copy_=copy_table)
        self.tables: dict[str, TableCoup] = {}
        self.folding = TableLocks()
        self.metrics: Metrics | None = None
        self.resuming: dict[str, asyncio.Future[None]] = {}  # the tables being resumed
        # Where each table's cards come from, picked once (services.dealer_policy.sources).
        self.sources: dict[str, CardSource] = {name: source_of(config, peer) for name, config in tables.items()}

    # ---- state ----------------------------------------------------------

    def new_table(self, name: str) -> TableCoup:
        if name not in self.config:
            raise RuleViolation("tables", f"table {name} is not configured")
        t = new_table(name, self.config[name], self.sources[name])
        if self.metrics is not None:
            t.cards.watched(self.metrics, t)
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
                await self.caught_up(t)

    async def caught_up(self, t: TableCoup) -> None:
        """``reload`` of one table, its lock held: before a decision no append
        of its own guards (a card-reading shoe's card taken as what the coup
        waits for), the coup as the record has it, whichever instance wrote it."""
        async def follow_locked(subject: str, seq: int, batch: Batch) -> None:
            self._observe(subject, seq, batch)

        await self.repository.catch_up(subjects.aggregate_filter("coup", t.name), t.seen, follow_locked, self.skip)

    def skip(self, m: Stored) -> None:
        """A message on a coup subject that is no batch this code can read
        (filed as a dead letter): nothing to fold, but looked at, so that the
        table's guard expects what the stream holds; written as ours under the
        coup being dealt, it holds that coup."""
        if (t := self.tables.get(subjects.tokens(m.subject)[0])) is not None:
            follow(self.repository, t, m)

    def stage(self, t: TableCoup, events: list[AnyEvent], msg_id: str, causation: str, command: str = "") -> None:
        """Take a decision now (the coup moves on) and record it with the next
        ``flush``; ``command`` is the digest of the terminal's command that
        caused it. Between coups it goes into the next coup's record, before
        that coup's opening (``TableCoup.place``)."""
        self.repository.keep(t, wide=t.finished)
        if not t.staged.steps and before_opening(events):
            t.staged.filed = t.next_coup
        if t.staged.filed:
            t.prelude, t.prelude_of = {**(t.prelude if t.prelude_of == t.staged.filed else {}),
                                       causation: command}, t.staged.filed
        self.repository.stage(t, events, msg_id, causation, command)

    async def flush(self, t: TableCoup) -> None:
        """Append every staged decision as one batch, guarded on the coup's
        subject; a coup's opening, or a write to a finished coup, on every
        coup subject of the table (expecting the last this instance has seen):
        what a coup leaves to the next (the shoe holder, 000 8.18) is decided
        on the whole of it, so the next is opened only by an instance that has
        seen the last write to the coup before, and nothing is written to a
        coup once the next is open."""
        opened, events = t.staged.opening, [e for evs, _, _, _ in t.staged.steps for e in evs]
        guard, expected = (subjects.aggregate_filter("coup", t.name), t.seen) if t.staged.wide else (None, t.last_seq)
        # What is recorded between coups is filed under the next coup, and the shoe of the coup before (the
        # table's first coup: the shoe in play), where the coup before's record is read with it.
        coup, shoe = (t.staged.filed, t.shoe or t.shoe_seen) if t.staged.filed else (t.coup, t.shoe)
        ack = await self.repository.flush(t, subjects.event(t.name, shoe, coup, "coup"), expected=expected,
                                          guard=guard, table=t.name, shoe=shoe, coup=coup)
        if ack is None:
            return
        if ack.duplicate and opened:
            # The stream holds an opening by this command already (its message id is the table's and the
            # command's): this one did not open a coup.
            raise RuleViolation("command id", f"command id {opened} opened a coup of table {t.name} already "
                                "(one of its earlier coups): a new coup takes a new command id")
        t.awaiting_card = 0.0  # the coup has moved: what it waits for, it waits for from now
        if not ack.duplicate:
            count_recorded(self.metrics, t.name, events, t.game.procedure(t.state) if t.state is not None else "")
        t.seen = max(t.seen, ack.seq)

    async def commit(self, t: TableCoup, events: list[AnyEvent], msg_id: str, causation: str, command: str) -> None:
        self.stage(t, events, msg_id, causation, command)
        await self.flush(t)

    async def observe(self, subject: str, seq: int, batch: Batch) -> None:
        """Follow the stream: apply what another instance appended."""
        async with self.folding(subjects.tokens(subject)[0]):
            self._observe(subject, seq, batch)

    def _observe(self, subject: str, seq: int, batch: Batch) -> None:
        t = self.tables.get(subjects.tokens(subject)[0])
        if t is not None:
            follow(self.repository, t, Stored(seq, subject, batch))

    # ---- deciding -------------------------------------------------------

    def decide(self, t: TableCoup, command: object) -> list[AnyEvent]:
        if t.state is None:
            raise RuleViolation("coup", "no coup is open at this table")
        return t.game.decide(t.rules, t.state, command)

    def waiting(self, t: TableCoup) -> commands.Waiting:
        if (incident := t.incident) is not None:  # the first held for, in the coup or before the next opens
            keying = incident.kind == "unread" and not t.keyed
            return commands.Waiting("key" if keying else "ruling", incident=incident.kind,
                                    house_rule=incident.house_rule)
        if t.shuffling and (t.finished or t.game.waiting(t.rules, t.state).kind == "card"):
            return commands.Waiting("shuffle")  # for the card-reading shoe's next order
        if t.held:
            return commands.Waiting("held")
        if t.state is None:
            return commands.Waiting("open")
        return t.cards.told(t.game.waiting(t.rules, t.state))

    def _reply(self, t: TableCoup) -> commands.Reply:
        waiting = self.waiting(t)
        if self.metrics is not None:
            t.cards.replied(self.metrics, t, waiting)
        return commands.Reply(True, coup=t.coup, shoe=t.shoe, waiting=waiting)

    async def handle(self, cmd: commands.PolicyCommand) -> commands.Reply:
        """Decide ``cmd`` with the table's lock held throughout (the table
        folded first where it is not held yet), so that a decision is never
        taken on one coup and recorded on the next. Another instance's write
        in the meantime fails the append's expected-sequence guard."""
        async with self.folding(cmd.table):
            t = await self._held(cmd.table)
            try:
                return await self._handle(t, cmd)
            finally:
                self.repository.unstage(t)  # whatever could not be recorded did not happen

    async def _handle(self, t: TableCoup, cmd: commands.PolicyCommand) -> commands.Reply:
        if (name := getattr(cmd, "supervisor", "")) and t.config.supervisors and name not in t.config.supervisors:
            raise RuleViolation("roster", f"{name} is not on the casino's roster of supervisors "
                                f"({', '.join(t.config.supervisors)}): a direction is taken from a supervisor on it")
        if isinstance(cmd, commands.CardRead | commands.CutCardRead):
            taken = await reading.report(self, t, cmd)
            # The device is told what its card was taken as (the cut card first in a round: reshuffle now).
            return self._reply(t) if taken is None else reading.answered(taken, self._reply(t))
        if isinstance(cmd, commands.Rule):
            await reading.rule(self, t, cmd)
            return self._reply(t)
        if isinstance(cmd, commands.KeyCard):
            await reading.key(self, t, cmd)
            return self._reply(t)
        if isinstance(cmd, commands.Status):
            await self.caught_up(t)  # the latest coup as the record has it, whichever instance opened it
            await reading.shuffled(self, t)
            if t.state is not None and self.waiting(t).kind in ("card", "pass"):
                # The dealer's own step, left half-taken (its instance stopped, or the table moved
                # between instances as it stepped): taken now, beside the answer.
                self._resume_later([t.name])
            return self._reply(t)
        if isinstance(cmd, commands.OpenCoup):
            await opening.open_coup(self, t, cmd)
            return self._reply(t)
        if cmd.coup == t.coup and t.held:
            raise RuleViolation(commands.HELD, f"coup {t.coup} is held for compliance, nothing more is dealt in it: "
                                f"{t.held}; the table goes on with its next coup")
        if cmd.coup != t.coup or t.state is None:
            raise RuleViolation("coup", f"coup {cmd.coup} is not the coup being dealt at {cmd.table}")
        if isinstance(cmd, commands.CloseBetting) and t.state.phase == "betting":
            await booking.book_open(self, t)  # the book a coup is dealt from is open before it closes
        if not t.recorded(cmd):  # a retried command was recorded once already
            await self._command(t, cmd)
        await self.advance(t)  # and the dealer's own steps are finished either way
        return self._reply(t)

    async def _command(self, t: TableCoup, cmd: commands.CoupCommand) -> None:
        if isinstance(cmd, commands.CloseBetting):
            book = await self.peer.must(subjects.command(t.name, "book"),
                                        commands.CloseBook(f"{t.coup}:close-book", t.name, t.coup))
            closing = t.game.close_betting(book.wagers)
            self.stage(t, self.decide(t, closing), f"{t.coup}:close", cmd.id, commands.digest(cmd))
            return
        rule_cmd = t.game.from_terminal(cmd)
        self.stage(t, self.decide(t, rule_cmd), commands.write_id(t.coup, cmd.id), cmd.id, commands.digest(cmd))
        # A player's choice is recorded before anything it calls for is done at
        # another service (a card drawn, an extra stake booked): two terminals
        # racing with different choices, the loser's would otherwise be drawn
        # or booked for a choice never recorded. (Closing the betting is the
        # same whoever asks, and goes with the deal in one batch.)
        await self.flush(t)

    async def _stake(self, t: TableCoup) -> None:
        """Book the extra stakes of the coup's recorded decisions not yet
        confirmed (after a restart, all of them: the wager book answers one
        booked already as done), before the coup goes on."""
        for cause, extra in list(t.extras.items()):
            if cause not in t.staked:
                await self.peer.must(subjects.command(t.name, "book"), extra)
                t.staked.add(cause)

    async def advance(self, t: TableCoup) -> None:
        """Take every step the dealer takes without waiting for a player: draw the
        cards due (as many at once as are certainly due), pass the cards due, and
        end the round at the shoe. The steps taken are recorded as one batch
        before anyone is waited for."""
        await self._stake(t)
        while t.state is not None and t.incident is None and not t.held:
            step = t.game.next_step(t.rules, t.state)
            if step.kind == "pass" and step.waiting.hand is not None:
                hand = step.waiting.hand
                self.stage(t, self.decide(t, t.game.pass_cards(hand)), f"{t.coup}:pass:{hand}", f"{t.coup}:pass:{hand}")
                continue
            if step.kind == "draw" and (drawn := await self._draw(t, step)) is not None:
                for i, (card, position) in enumerate(zip(drawn.cards, drawn.positions, strict=True)):
                    deal = t.game.deal(card, position, t.game.next_step(t.rules, t.state).waiting.seat)
                    self.stage(t, self.decide(t, deal), f"{t.coup}:card:{step.first + i}",
                               f"{t.coup}:draw:{step.first}")
                continue
            if step.kind == "finished":
                await self.flush(t)
                self._ask_end_round(t)
                return
            break
        await self.flush(t)

    async def _draw(self, t: TableCoup, step: Step) -> commands.Reply | None:
        """The cards of a draw from the table's card source, or None: the coup waits for them."""
        try:
            return await t.cards.draw(t, step)
        except RuleViolation as exc:
            if exc.clause == ROUND:  # the shoe deals no round of this coup: a fault, for compliance
                await self.flush(t)
                hold(t, t.last_seq, f"the shoe refused the coup's cards: {exc.reason}")
            raise

    def _ask_end_round(self, t: TableCoup) -> None:
        """Ask the shoe to end the finished coup's round (its cards to the
        discard rack) while the terminal is answered: the result is recorded,
        and the next coup at the table waits for the round's end (``_end_round``).
        Asked again if a first asking failed."""
        if t.ending is not None and not failed(t.ending):
            return
        t.ending = asyncio.ensure_future(self.peer.must(subjects.command(t.name, "shoe"), commands.EndRound(
            f"{t.coup}:end", t.name, t.coup, t.config.ruleset, _pickup(t.state), next=f"{t.name}-{t.number + 1:06d}")))
        t.ending.add_done_callback(logged("a round's end at the shoe failed (asked again before the next coup)"))

    async def end_round(self, t: TableCoup) -> commands.Reply:
        """Until the finished coup's round has ended at the shoe: the shoe's
        answer (naming the next coup and its shoe where it started its round
        too). Another instance may have finished the coup: the shoe answers a
        round already ended as done."""
        self._ask_end_round(t)
        assert t.ending is not None
        reply: commands.Reply = await asyncio.shield(t.ending)
        return reply

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
            async with self.folding(name):
                try:
                    self.tables.pop(name, None)
                    t = await self._held(name)
                    if t.state is not None:
                        await self._resume(t)
                except Exception as exc:  # refused, or the server away: the table's next command finds it there
                    log.error("table %s: cannot resume its coup: %s: %s", name, type(exc).__name__, exc)
                finally:
                    if name in self.tables:
                        self.repository.unstage(self.tables[name])

    async def _resume(self, t: TableCoup) -> None:
        assert t.state is not None
        if t.held:  # nothing is dealt in it; the next opening ends its round
            return
        if t.finished:  # its round's end asked again (the shoe answers one ended already as done)
            self._ask_end_round(t)
            return
        await reading.ask_shoe(self, t, commands.StartRound(f"{t.coup}:start", t.name, t.coup, t.config.ruleset))
        if t.state.phase == "betting":
            await booking.book_open(self, t)
        else:
            await self.advance(t)


def _pickup(state: Coup | None) -> tuple[str, ...]:
    """The cards in the order they were picked up (002 (8), 003 7.7)."""
    assert state is not None
    return state.pickup

