"""The dealer-policy service's handlers: it opens each coup, has the wager
service close betting, makes the offers, draws cards from the shoe service,
applies the tableau or the blackjack flow, and records the result."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from casino import commands as c
from casino import rulesets
from casino.metrics import Metrics, count_recorded
from casino.rules.baccarat import coup as bac
from casino.rules.baccarat import messages as bm
from casino.rules.blackjack import coup as bj
from casino.rules.blackjack import messages as jm
from casino.rules.errors import RuleViolation
from casino.rules.ruleset import BaccaratRules, BlackjackRules, Ruleset
from casino.service import Clock, Peer, Recorder, TableLocks, digest, log, utc_now
from casino.store import subjects
from casino.store.envelope import AnyEvent, Batch, CoupConfigured
from casino.store.eventstore import Conflict, EventStore, latest_at_table
from casino.tables import TableConfig

Coup = bac.BaccaratCoup | bj.BlackjackCoup


class Staged(msgspec.Struct):
    """Decisions taken but not yet appended: the dealer's own steps, recorded
    together as one batch when the coup next waits for someone else."""

    steps: list[tuple[list[AnyEvent], str, str]] = []  # (events, message id, causation)
    # What the table was before the first staged step, to undo them if they cannot be recorded.
    before: tuple[Coup | None, frozenset[str], int] | None = None


class TableCoup(msgspec.Struct):
    """The table's current (latest) coup and what carries over to the next."""

    name: str
    config: TableConfig
    rules: Ruleset
    number: int = 0
    coup: str = ""
    shoe: str = ""
    state: Coup | None = None
    last_seq: int = 0
    seen: int = 0
    applied: frozenset[str] = frozenset()
    carried_holder: int | None = None
    style: str = ""
    style_shoe: str = ""
    staged: Staged = msgspec.field(default_factory=Staged)
    appending: str = ""  # the message id of the batch being appended
    stale: bool = False  # another writer appended while we were deciding
    # The finished coup's round ending at the shoe, asked after the terminal has the result.
    ending: asyncio.Future[Any] | None = None

    @property
    def finished(self) -> bool:
        return self.state is None or self.state.phase == "finished"


class DealerPolicyService:
    producer = "dealer-policy"

    def __init__(self, store: EventStore, peer: Peer, tables: dict[str, TableConfig], clock: Clock = utc_now) -> None:
        self.store, self.peer, self.config = store, peer, tables
        self.recorder = Recorder(store, self.producer, clock)
        self.tables: dict[str, TableCoup] = {}
        self.folding = TableLocks()
        self.metrics: Metrics | None = None

    # ---- state ----------------------------------------------------------

    def _new_table(self, name: str) -> TableCoup:
        if name not in self.config:
            raise RuleViolation("tables", f"table {name} is not configured")
        cfg = self.config[name]
        return TableCoup(name, cfg, rulesets.load(cfg.ruleset))

    async def rebuild(self, table: str | None = None) -> None:
        """Fold each table's latest coup. Nothing earlier decides anything: the
        next coup's number, the shoe holder (000 8.18) and the style in force
        (001 8.5: every coup of a style ruleset is dealt in a style) come from
        it. So a start reads one coup a table however long the history. What
        the follower brings meanwhile waits (applied to a state not yet folded
        up to it, a later event would hide the earlier ones from the fold)."""
        for name in [table] if table else list(self.config):
            async with self.folding(name):
                self.tables[name] = self._new_table(name)
                latest = await latest_at_table(self.store, name, "coup")
                if latest is None:
                    continue
                _, shoe, coup, _ = subjects.tokens(latest.subject)
                for msg in await self.store.read(subjects.event(name, shoe, coup, "coup")):
                    self._observe(msg.subject, msg.seq, msg.batch)

    @staticmethod
    def _carry(t: TableCoup) -> tuple[int | None, str, str]:
        """What the finished coup leaves to the next: the shoe holder (000 8.18),
        the style in force (001 8.5: on the shoe; on a continuous shuffler, until
        changed by approved procedure)."""
        holder, style, style_shoe = t.carried_holder, t.style, t.style_shoe
        if isinstance(t.state, bac.BaccaratCoup):
            holder = bac.shoe_holder_after(t.state)
            if t.state.opened_as.startswith("style"):
                style, style_shoe = t.state.opened_as, t.shoe
        return holder, style, style_shoe

    def _next_coup(self, t: TableCoup) -> None:
        t.carried_holder, t.style, t.style_shoe = self._carry(t)
        t.state, t.applied, t.last_seq, t.ending = None, frozenset(), 0, None

    def _apply(self, t: TableCoup, event: AnyEvent, causation: str) -> None:
        if isinstance(event, CoupConfigured):
            t.number = event.coup_number
            t.state = bac.BaccaratCoup() if event.game == "baccarat" else bj.BlackjackCoup()
        elif isinstance(t.state, bac.BaccaratCoup):
            t.state = bac.evolve(t.state, event)  # type: ignore[arg-type]
        elif isinstance(t.state, bj.BlackjackCoup):
            t.state = bj.evolve(t.state, event)  # type: ignore[arg-type]
        t.applied = t.applied | {causation}

    def table(self, name: str) -> TableCoup:
        if name not in self.tables:
            self.tables[name] = self._new_table(name)
        return self.tables[name]

    async def reload(self, cmd: c.CoupCommand) -> None:
        """Catch up with what other instances appended since we last looked."""
        t = self.tables.get(cmd.table)
        if t is None:
            return
        for msg in await self.store.read(subjects.aggregate_filter("coup", cmd.table), after=t.seen):
            await self.observe(msg.subject, msg.seq, msg.batch)

    def _stage(self, t: TableCoup, events: list[AnyEvent], msg_id: str, causation: str) -> None:
        """Take a decision now (the coup moves on) and record it with the next flush."""
        if not t.staged.steps:
            t.staged.before = (t.state, t.applied, t.number)
        for e in events:
            self._apply(t, e, causation)
        t.staged.steps.append((events, msg_id, causation))

    def _unstage(self, t: TableCoup) -> None:
        """Undo the decisions not recorded: nothing happened that is not in the stream."""
        if t.staged.before is not None:
            t.state, t.applied, t.number = t.staged.before
        t.staged, t.appending = Staged(), ""

    async def _flush(self, t: TableCoup) -> None:
        """Append every staged decision as one batch."""
        steps = t.staged.steps
        if not steps:
            return
        events = [e for evs, _, _ in steps for e in evs]
        causes = [cause for evs, _, cause in steps for _ in evs]
        t.appending = self.recorder.message_id(steps[0][1])
        try:
            ack = await self.recorder.record(
                subjects.event(t.name, t.shoe, t.coup, "coup"), events, expected=t.last_seq, msg_id=steps[0][1],
                table=t.name, shoe=t.shoe, coup=t.coup, causation=causes)
        except BaseException:
            self._unstage(t)
            raise
        finally:
            if t.stale:  # what we hold may be behind the stream: fold the table again
                await self.rebuild(t.name)
                raise Conflict(f"another writer appended to {t.name} while this decision was taken")
        t.staged, t.appending = Staged(), ""
        if not ack.duplicate:
            procedure = t.state.procedure if isinstance(t.state, bac.BaccaratCoup) else ""
            count_recorded(self.metrics, t.name, list(events), procedure)
        t.last_seq = max(t.last_seq, ack.seq)
        t.seen = max(t.seen, ack.seq)

    async def _commit(self, t: TableCoup, events: list[AnyEvent], msg_id: str, causation: str) -> None:
        self._stage(t, events, msg_id, causation)
        await self._flush(t)

    async def observe(self, subject: str, seq: int, batch: Batch) -> None:
        """Follow the stream: apply what another instance appended."""
        async with self.folding(subjects.tokens(subject)[0]):
            self._observe(subject, seq, batch)

    def _observe(self, subject: str, seq: int, batch: Batch) -> None:
        table, shoe, coup, _ = subjects.tokens(subject)
        t = self.tables.get(table)
        if t is None or coup < t.coup or (seq <= t.last_seq and coup == t.coup):
            return
        if t.staged.steps:
            if t.appending and batch.events and batch.events[0].id.startswith(f"{t.appending}/"):
                t.last_seq = t.seen = seq  # our own batch, seen before its ack: its decisions are taken
            else:
                t.stale = True  # another instance's: ours cannot be recorded on top of it unseen
            return
        t.seen = max(t.seen, seq)
        if coup != t.coup:
            self._next_coup(t)
            t.coup, t.shoe = coup, shoe
        for env in batch.events:
            self._apply(t, env.data, env.causation)
        t.last_seq = seq

    # ---- deciding -------------------------------------------------------

    def _decide(self, t: TableCoup, command: object) -> list[AnyEvent]:
        if isinstance(t.rules, BaccaratRules) and isinstance(t.state, bac.BaccaratCoup):
            return list(bac.decide(t.rules, t.state, command))  # type: ignore[arg-type]
        if isinstance(t.rules, BlackjackRules) and isinstance(t.state, bj.BlackjackCoup):
            return list(bj.decide(t.rules, t.state, command))  # type: ignore[arg-type]
        raise RuleViolation("coup", "no coup is open at this table")

    def waiting(self, t: TableCoup) -> c.Waiting:
        s = t.state
        if s is None:
            return c.Waiting("open")
        if isinstance(s, bac.BaccaratCoup):
            a = bac.awaiting(s)
            kind = {"nothing": "finished", "open": "open"}.get(a.kind, a.kind)
            return c.Waiting(kind, a.seat, a.hand, offer=a.offer)
        assert isinstance(t.rules, BlackjackRules)
        b = bj.awaiting(s, t.rules)
        kind = {"nothing": "finished"}.get(b.kind, b.kind)
        if kind != "decision" or b.seat is None:
            return c.Waiting(kind, b.seat, box_hand=b.hand)
        box = next(x for x in s.boxes if x.seat == b.seat)
        options = tuple(a for a in ("stand", "hit", "double", "split", "insurance")
                        if bj.check(t.rules, s, jm.Decide(b.seat, b.hand, a, 1 if a == "insurance" else 0)) is None)
        return c.Waiting(kind, b.seat, box_hand=b.hand, cards=box.hands[b.hand].codes,
                         dealer=tuple(p.card for p in s.dealer if p.face_up), options=options)

    def _reply(self, t: TableCoup) -> c.Reply:
        return c.Reply(True, coup=t.coup, shoe=t.shoe, waiting=self.waiting(t))

    async def handle(self, cmd: c.CoupCommand) -> c.Reply:
        t = self.table(cmd.table)
        try:
            return await self._handle(t, cmd)
        finally:
            self._unstage(t)  # whatever could not be recorded did not happen

    async def _handle(self, t: TableCoup, cmd: c.CoupCommand) -> c.Reply:
        if isinstance(cmd, c.Status):
            return self._reply(t)
        if isinstance(cmd, c.OpenCoup):
            if t.state is not None and not t.finished:
                if cmd.id in t.applied:  # a retry: the first attempt may have stopped before the book opened
                    if t.state.phase == "betting":
                        await self._open_book(t)
                    return self._reply(t)
                raise RuleViolation("coup", f"coup {t.coup} is still being dealt")
            await self._open(t, cmd)
            return self._reply(t)
        if cmd.coup != t.coup or t.state is None:
            raise RuleViolation("coup", f"coup {cmd.coup} is not the coup being dealt at {cmd.table}")
        if cmd.id not in t.applied:  # a retried command was recorded once already
            await self._command(t, cmd)
        await self.advance(t)  # and the dealer's own steps are finished either way
        return self._reply(t)

    async def _open(self, t: TableCoup, cmd: c.OpenCoup) -> None:
        if t.state is not None:  # the last coup's round ends at the shoe before the next starts
            await self._end_round(t)
        number = t.number + 1
        coup = f"{t.name}-{number:06d}"
        start = await self.peer.must(subjects.command(t.name, "shoe"),
                                     c.StartRound(f"{coup}:start", t.name, coup, t.config.ruleset))
        holder, style, style_shoe = self._carry(t)
        game = "baccarat" if isinstance(t.rules, BaccaratRules) else "blackjack"
        events: list[AnyEvent] = [
            CoupConfigured(t.name, game, t.config.ruleset, _ruleset_digest(t.rules), number)]
        if isinstance(t.rules, BaccaratRules):
            # 001 8.5: the style in force on the shoe; a continuous shuffler deals each round from a new one
            shoe_style = (style or None) if style_shoe == start.shoe or _continuous(t.rules) else None
            procedure = cmd.procedure or shoe_style or t.config.procedure or t.rules.procedures[0]
            opening = bm.OpenCoup(coup, procedure, t.config.approvals + cmd.approvals, shoe_style, holder)
            events += bac.decide(t.rules, bac.BaccaratCoup(), opening)  # refused here: nothing has changed
        else:
            events += bj.decide(t.rules, bj.BlackjackCoup(), jm.OpenCoup(coup))
        self._next_coup(t)
        t.coup, t.shoe = coup, start.shoe
        # The id names the command: another instance opening this number for another
        # command must lose the race, not be taken for a duplicate of it.
        await self._commit(t, events, f"{coup}:open:{cmd.id}", cmd.id)
        await self._open_book(t)

    async def _open_book(self, t: TableCoup) -> None:
        """Open the coup's wager book (asked again, the wager service answers from its record)."""
        await self.peer.must(subjects.command(t.name, "book"),
                             c.OpenBook(f"{t.coup}:open-book", t.name, t.coup, t.shoe, t.config.ruleset))

    async def _command(self, t: TableCoup, cmd: c.CoupCommand) -> None:
        rule_cmd: object
        match cmd:
            case c.CloseBetting():
                book = await self.peer.must(subjects.command(t.name, "book"),
                                            c.CloseBook(f"{t.coup}:close-book", t.name, t.coup))
                closing = bm.CloseBetting(book.wagers) if isinstance(t.state, bac.BaccaratCoup) else \
                    jm.CloseBetting(book.wagers)
                self._stage(t, self._decide(t, closing), f"{t.coup}:close", cmd.id)
                return
            case c.AnswerOffer():
                rule_cmd = bm.AnswerOffer(cmd.seat, cmd.accept, cmd.plays)
            case c.ExposeHand():
                rule_cmd = bm.ExposeHand(cmd.seat, cmd.hand)
            case c.ReturnCards():
                rule_cmd = bm.ReturnCards(cmd.seat, cmd.hand)
            case c.ReportHandlingBreach():
                rule_cmd = bm.ReportHandlingBreach(cmd.seat, cmd.hand, cmd.note)
            case c.PassShoe():
                rule_cmd = bm.PassShoe(cmd.seat)
            case c.ForfeitShoe():
                rule_cmd = bm.ForfeitShoe(cmd.seat, cmd.supervisor)
            case c.Decide():
                rule_cmd = jm.Decide(cmd.seat, cmd.hand, cmd.action, cmd.amount)
                events = self._decide(t, rule_cmd)  # checked before the stake is recorded
                await self._extra_stake(t, cmd, events)
                self._stage(t, events, c.write_id(t.coup, cmd.id), cmd.id)
                return
            case _:
                raise RuleViolation("protocol", f"{type(cmd).__name__} is not a coup command")
        self._stage(t, self._decide(t, rule_cmd), c.write_id(t.coup, cmd.id), cmd.id)

    async def _extra_stake(self, t: TableCoup, cmd: c.Decide, events: list[AnyEvent]) -> None:
        for e in events:
            if isinstance(e, jm.DecisionTaken) and e.action in ("double", "split", "insurance"):
                await self.peer.must(subjects.command(t.name, "book"), c.PlaceExtra(
                    cmd.id, t.name, t.coup, e.seat, e.hand, e.action, e.amount))

    async def advance(self, t: TableCoup) -> None:
        """Take every step the dealer takes without waiting for a player: draw the
        cards due (as many at once as are certainly due), pass the cards due, and
        end the round at the shoe. The steps taken are recorded as one batch
        before anyone is waited for."""
        while True:
            w = self.waiting(t)
            if w.kind == "card":
                index, count = _cards_dealt(t.state), _cards_due(t.state)
                by_tableau = isinstance(t.state, bac.BaccaratCoup) and bac.dealt_by_tableau(t.state)
                drawn = await self.peer.must(subjects.command(t.name, "shoe"), c.DrawCard(
                    f"{t.coup}:draw:{index}", t.name, t.coup, t.config.ruleset, index, count, by_tableau))
                for i, (card, position) in enumerate(zip(drawn.cards, drawn.positions, strict=True)):
                    w = self.waiting(t)
                    deal: object = (bm.DealCard(card, position, w.seat)
                                    if isinstance(t.state, bac.BaccaratCoup) else jm.DealCard(card, position))
                    self._stage(t, self._decide(t, deal), f"{t.coup}:card:{index + i}", f"{t.coup}:draw:{index}")
            elif w.kind == "pass" and w.hand is not None:
                passing = bm.PassCards("player" if w.hand == "player" else "banker")
                self._stage(t, self._decide(t, passing), f"{t.coup}:pass:{w.hand}", f"{t.coup}:pass:{w.hand}")
            elif w.kind == "finished":
                await self._flush(t)
                self._ask_end_round(t)
                return
            else:
                await self._flush(t)
                return

    def _ask_end_round(self, t: TableCoup) -> None:
        """Ask the shoe to end the finished coup's round (its cards to the
        discard rack) while the terminal is answered: the result is recorded,
        and the next coup at the table waits for the round's end (``_end_round``).
        Asked again if a first asking failed."""
        if t.ending is not None and not (t.ending.done() and (t.ending.cancelled() or t.ending.exception())):
            return
        t.ending = asyncio.ensure_future(self.peer.must(subjects.command(t.name, "shoe"), c.EndRound(
            f"{t.coup}:end", t.name, t.coup, t.config.ruleset, _pickup(t.state))))
        t.ending.add_done_callback(_log_failed_ending)

    async def _end_round(self, t: TableCoup) -> None:
        """Until the finished coup's round has ended at the shoe. Another instance
        may have finished the coup: the shoe answers a round already ended as done."""
        self._ask_end_round(t)
        assert t.ending is not None
        await asyncio.shield(t.ending)

    async def finish_rounds(self) -> None:
        """On stopping: wait for the rounds' ends still being asked (what does
        not finish is asked again by the next coup, or on resuming)."""
        pending = [t.ending for t in self.tables.values() if t.ending is not None and not t.ending.done()]
        if pending:
            await asyncio.wait(pending, timeout=10)

    async def resume(self) -> None:
        """After a restart: finish every step a coup was in the middle of."""
        for t in self.tables.values():
            if t.state is None:
                continue
            try:
                await self._resume(t)
            except (RuleViolation, RuntimeError) as exc:
                log.error("table %s: cannot resume coup %s: %s", t.name, t.coup, exc)
            finally:
                self._unstage(t)

    async def _resume(self, t: TableCoup) -> None:
        assert t.state is not None
        await self.peer.must(subjects.command(t.name, "shoe"),
                             c.StartRound(f"{t.coup}:start", t.name, t.coup, t.config.ruleset))
        if t.state.phase == "betting":
            await self._open_book(t)
        else:
            await self.advance(t)


def _continuous(rules: Ruleset) -> bool:
    return rules.shoe.shuffler == "continuous_shuffler"


def _log_failed_ending(ending: asyncio.Future[Any]) -> None:
    if not ending.cancelled() and (exc := ending.exception()) is not None:
        log.warning("a round's end at the shoe failed (asked again before the next coup): %s", exc)


def _cards_dealt(state: Coup | None) -> int:
    if isinstance(state, bac.BaccaratCoup):
        return len(state.cards)
    assert state is not None
    return len(state.dealer) + sum(len(h.cards) for b in state.boxes for h in b.hands)


def _cards_due(state: Coup | None) -> int:
    """How many cards are certainly due now, whatever they turn out to be: the
    rest of the initial deal; after it, one at a time (the tableau or a player's
    decision depends on each). A baccarat run the tableau alone decides is
    drawn on from these by the shoe (``DrawCard.tableau``)."""
    if isinstance(state, bac.BaccaratCoup):
        return 4 - len(state.cards) if state.phase == "dealing" else 1
    assert state is not None
    if state.phase == "dealing":
        return bj.initial_cards(state) - _cards_dealt(state)
    return 1


def _pickup(state: Coup | None) -> tuple[str, ...]:
    """The cards in the order they were picked up (002 (8), 003 7.7)."""
    assert state is not None
    return state.pickup


def _ruleset_digest(rules: Ruleset) -> str:
    return digest(msgspec.json.encode(rules))
