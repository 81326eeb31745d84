"""The dealer-policy service's handlers: it opens each coup, has the wager
service close betting, makes the offers, draws cards from the shoe service,
applies the tableau or the blackjack flow, and records the result."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from casino import games
from casino.audit import verify
from casino.config import rulesets
from casino.config.tables import TableConfig
from casino.games import Carry, Coup, Game
from casino.metrics import Metrics, count_recorded
from casino.nats.partitions import within
from casino.protocol import commands
from casino.protocol.service import Clock, Peer, TableLocks, log, utc_now
from casino.rules.errors import RuleViolation
from casino.rules.ruleset import Ruleset, RulesetError
from casino.rules.shoe import CardDrawn
from casino.store import subjects
from casino.store.envelope import (
    NOT_OF_THE_GAME,
    OPENINGS_KEPT,
    AnyEvent,
    Batch,
    CardIncident,
    CoupConfigured,
    CoupHeld,
    CoupRuled,
    RulesetRecorded,
)
from casino.store.eventstore import EventStore, Stored, latest_at_table
from services.dealer_policy import reading
from services.repository import Held, Repository

BOOK_WAIT = 3.0  # seconds a command waits for the coup's wager book to open (under a terminal's patience)


class Staged(msgspec.Struct):
    """Decisions taken but not yet appended: the dealer's own steps, recorded
    together as one batch when the coup next waits for someone else."""

    steps: list[tuple[list[AnyEvent], str, str, str]] = []  # (events, message id, causation, its digest)
    # Whether the steps open a coup or write to a finished one (a shoe passed between coups):
    # appended under the table's guard, not the coup's alone.
    table_wide: bool = False
    # What the table was before the first staged step (the coup before, where the step opens the
    # next), to undo them if they cannot be recorded: then caught up and decided again.
    before: tuple[Any, ...] | None = None
    opening: str = ""  # the command id of the opening staged, if the steps open a coup


class TableCoup(Held, kw_only=True):
    """The table's current (latest) coup and what carries over to the next.
    ``last_seq`` and ``applied`` are the coup's; ``seen`` the last of the
    table's coup messages folded, whichever coup it was of."""

    name: str
    config: TableConfig
    rules: Ruleset
    game: Game
    number: int = 0
    coup: str = ""
    shoe: str = ""
    state: Coup | None = None
    seen: int = 0
    # The extra stakes (double, split, insurance) the coup's recorded decisions
    # call for, by the decision's cause; and those the wager book has confirmed.
    extras: dict[str, commands.PlaceExtra] = msgspec.field(default_factory=dict)
    staked: set[str] = msgspec.field(default_factory=set)
    carried: Carry = Carry()
    ruleset_recorded: str = ""  # the digest of the ruleset last seen recorded at the table
    # The digests of the command ids that opened the coup and the table's coups before it, the latest first
    # (CoupConfigured.opened_before, and the coup's own).
    openings: tuple[str, ...] = ()
    dealt_under: str = ""  # the digest of the ruleset the coup is dealt under (its coup.configured)
    dealer: str = ""  # who deals the coup (its coup.configured): the one signed in at the table's terminal
    # Why the coup is held for compliance ("" where it is not: docs/clauses.md), and whether its
    # coup.held is recorded.
    held: str = ""
    held_seq: int = 0  # the message it is held for
    held_recorded: bool = False
    incident: CardIncident | None = None  # what a card-reading shoe's card held the coup for, awaiting a ruling
    staged: Staged = msgspec.field(default_factory=Staged)
    # The finished coup's round ending at the shoe, asked after the terminal has the result.
    ending: asyncio.Future[Any] | None = None
    # The coup's wager book being opened (asked until the wager service answers), and for which coup.
    booking: asyncio.Future[Any] | None = None
    booking_for: str = ""

    @property
    def finished(self) -> bool:
        """Whether the coup is over: dealt to its end, or held for compliance."""
        return self.state is None or self.state.phase == "finished" or bool(self.held)


class DealerPolicyService:
    producer = "dealer-policy"

    def __init__(self, store: EventStore, peer: Peer, tables: dict[str, TableConfig], clock: Clock = utc_now) -> None:
        self.store, self.peer, self.config = store, peer, tables
        self.repository: Repository[TableCoup] = Repository(store, self.producer, self._fold, clock=clock)
        self.tables: dict[str, TableCoup] = {}
        self.folding = TableLocks()
        self.metrics: Metrics | None = None
        self.resuming: dict[str, asyncio.Future[None]] = {}  # the tables being resumed

    # ---- state ----------------------------------------------------------

    def new_table(self, name: str) -> TableCoup:
        if name not in self.config:
            raise RuleViolation("tables", f"table {name} is not configured")
        config = self.config[name]
        rules = rulesets.load(config.ruleset)
        return TableCoup(name=name, config=config, rules=rules, game=games.of(rules))

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
        latest = await latest_at_table(self.store, name, "coup")
        if latest is not None:
            _, shoe, coup, _ = subjects.tokens(latest.subject)
            for msg in await self.store.read(subjects.event(name, shoe, coup, "coup")):
                self._observe_into(t, msg)
            if not t.coup:  # the latest is a stray under a coup of no number of ours: the table's coups, whole
                for msg in await self.store.read(subjects.aggregate_filter("coup", name)):
                    self._observe_into(t, msg)
        self.tables[name] = t

    @staticmethod
    def _carry(t: TableCoup) -> Carry:
        """What the coup leaves to the next (the shoe holder, the style in force)."""
        return t.carried if t.state is None else t.game.carry(t.state, t.shoe, t.carried)

    @staticmethod
    def _carry_from(t: TableCoup) -> Carry:
        """What the coup leaves to the next; a held coup's as far as it can be
        followed, else what it was opened with."""
        try:
            return DealerPolicyService._carry(t)
        except Exception:  # a coup held for what cannot be followed
            return t.carried

    def _next_coup(self, t: TableCoup) -> None:
        t.carried = self._carry_from(t)
        t.state, t.applied, t.last_seq, t.ending = None, {}, 0, None
        t.extras, t.staked, t.held, t.held_seq, t.held_recorded, t.incident = {}, set(), "", 0, False, None

    @staticmethod
    def _fold(t: TableCoup, event: AnyEvent, causation: str) -> None:
        if isinstance(event, CoupConfigured):
            t.number, t.dealt_under, t.dealer = event.coup_number, event.ruleset_digest, event.dealer
            t.state = games.named(event.game).new()
            t.openings = (commands.id_digest(causation), *event.opened_before)[:OPENINGS_KEPT]
        elif isinstance(event, CoupHeld):
            t.held, t.held_recorded = event.reason, True
        elif isinstance(event, CardIncident):  # held until a supervisor rules (services.dealer_policy.reading)
            t.held, t.held_recorded, t.incident = event.what, True, event
        elif isinstance(event, CoupRuled):
            t.incident = None
            if event.ruling == "go_on":
                t.held, t.held_recorded = "", False
        elif t.state is not None:
            t.state = t.game.evolve(t.state, event)
        if (extra := t.game.extra(event, t.name, t.coup, causation)) is not None:
            t.extras = {**t.extras, causation: extra}

    async def _held(self, name: str) -> TableCoup:
        """The table as held, folded from its latest coup where it is not held
        yet (its lock held)."""
        if name not in self.tables:
            await self._rebuild(name)
        return self.tables[name]

    async def reload(self, cmd: commands.CoupCommand) -> None:
        """Catch up with what other instances appended since we last looked."""
        t = self.tables.get(cmd.table)
        if t is None:
            return
        await self.repository.catch_up(subjects.aggregate_filter("coup", cmd.table), t.seen, self.observe, self.skip)

    def skip(self, m: Stored) -> None:
        """A message on a coup subject that is no batch this code can read
        (filed as a dead letter): nothing to fold, but looked at, so that the
        table's guard expects what the stream holds; written as ours under the
        coup being dealt, it holds that coup."""
        if (t := self.tables.get(subjects.tokens(m.subject)[0])) is not None:
            self._observe_into(t, m)

    def _stage(self, t: TableCoup, events: list[AnyEvent], msg_id: str, causation: str, command: str = "") -> None:
        """Take a decision now (the coup moves on) and record it with the next
        flush; ``command`` is the digest of the terminal's command that caused it."""
        self._keep(t)
        for e in events:
            self._fold(t, e, causation)
        t.applied = {**t.applied, causation: command}  # a new dict: a staged step is undone by the old one
        t.staged.steps.append((events, msg_id, causation, command))

    def _keep(self, t: TableCoup) -> None:
        """Before the first decision staged: what the table is, kept (the coup
        moves on in place: its state as a copy), and whether the decisions
        open a coup or write to a finished one (guarded on the whole table)."""
        if t.staged.before is None:
            t.staged.before = (None if t.state is None else t.game.copy(t.state), t.applied, t.extras, t.number,
                               t.last_seq, t.ending, t.staked, t.carried, t.coup, t.shoe, t.openings, t.held,
                               t.held_seq, t.held_recorded, t.dealer, t.incident)
            t.staged.table_wide = t.finished

    def _unstage(self, t: TableCoup) -> None:
        """Undo the decisions not recorded: nothing happened that is not in the stream."""
        if t.staged.before is not None:
            (t.state, t.applied, t.extras, t.number, t.last_seq, t.ending, t.staked, t.carried, t.coup,
             t.shoe, t.openings, t.held, t.held_seq, t.held_recorded, t.dealer, t.incident) = t.staged.before
        t.staged = Staged()

    async def _flush(self, t: TableCoup) -> None:
        """Append every staged decision as one batch, guarded on the coup's
        subject; a coup's opening, or a write to a finished coup, on every
        coup subject of the table (expecting the last this instance has seen):
        what a coup leaves to the next (the shoe holder, 000 8.18) is decided
        on the whole of it, so the next is opened only by an instance that has
        seen the last write to the coup before, and nothing is written to a
        coup once the next is open."""
        steps = t.staged.steps
        if not steps:
            return
        events = [e for evs, _, _, _ in steps for e in evs]
        causes = [cause for evs, _, cause, _ in steps for _ in evs]
        digests = [command for evs, _, _, command in steps for _ in evs]
        guard, expected = ((subjects.aggregate_filter("coup", t.name), t.seen) if t.staged.table_wide
                           else (None, t.last_seq))
        try:
            ack = await self.repository.recorder.record(
                subjects.event(t.name, t.shoe, t.coup, "coup"), events, expected=expected, msg_id=steps[0][1],
                table=t.name, shoe=t.shoe, coup=t.coup, causation=causes, command=digests, guard=guard)
        except BaseException:
            self._unstage(t)
            raise
        if ack.duplicate and t.staged.opening:
            # The stream holds an opening by this command already (its message id is the table's and the
            # command's): this one did not open a coup.
            opening = t.staged.opening
            self._unstage(t)
            raise RuleViolation("command id", f"command id {opening} opened a coup of table {t.name} already "
                                "(one of its earlier coups): a new coup takes a new command id")
        t.staged = Staged()
        if not ack.duplicate:
            procedure = t.game.procedure(t.state) if t.state is not None else ""
            count_recorded(self.metrics, t.name, list(events), procedure)
        t.last_seq = max(t.last_seq, ack.seq)
        t.seen = max(t.seen, ack.seq)

    async def _commit(self, t: TableCoup, events: list[AnyEvent], msg_id: str, causation: str,
                      command: str) -> None:
        self._stage(t, events, msg_id, causation, command)
        await self._flush(t)

    async def observe(self, subject: str, seq: int, batch: Batch) -> None:
        """Follow the stream: apply what another instance appended."""
        async with self.folding(subjects.tokens(subject)[0]):
            self._observe(subject, seq, batch)

    def _observe(self, subject: str, seq: int, batch: Batch) -> None:
        t = self.tables.get(subjects.tokens(subject)[0])
        if t is not None:
            self._observe_into(t, Stored(seq, subject, batch))

    def _observe_into(self, t: TableCoup, m: Stored) -> None:
        """Fold one message of the table's coups, as the record holds it. A
        message under a coup of no number of ours, or of one no opening opened,
        is a stray, passed over; one the coup being dealt cannot take (no batch
        this code can read, written with a message id as ours are; events its
        rules do not give) holds the coup for compliance: nothing more is
        folded into it. Each is looked at: the table's guard expects it."""
        _, shoe, coup, _ = subjects.tokens(m.subject)
        t.seen = max(t.seen, m.seq)  # looked at, even a stray under an earlier coup: the table's guard counts it
        number = subjects.coup_number(coup)
        if number is None or subjects.table_of_coup(coup) != t.name:
            log.warning("%s seq %d is under no coup of table %s: passed over", m.subject, m.seq, t.name)
            return
        if coup < t.coup or (m.seq <= t.last_seq and coup == t.coup):
            return
        if coup != t.coup:
            if not any(isinstance(e.data, CoupConfigured) for e in m.batch.events):
                log.warning("%s seq %d is under a coup no opening opened: passed over", m.subject, m.seq)
                return
            self._next_coup(t)
            t.coup, t.shoe, t.number = coup, shoe, number
        if t.held and not m.batch.events:
            t.last_seq = max(t.last_seq, m.seq)
        elif t.held:
            try:  # a coup held, and whose coup.held is recorded since
                for env in m.batch.events:
                    if isinstance(env.data, CoupHeld | CoupRuled):
                        self._fold(t, env.data, env.causation)
            finally:
                t.last_seq = max(t.last_seq, m.seq)
        elif m.unreadable:
            t.last_seq = max(t.last_seq, m.seq)  # on the coup's subject: its guard expects it
            if m.msg_id and not t.finished:
                self._hold(t, m.seq, f"message seq {m.seq} of its record cannot be read ({m.unreadable})")
        elif differs := self._not_followed(t, m.batch):
            t.last_seq = max(t.last_seq, m.seq)
            why = f"message seq {m.seq} of its record cannot be followed ({differs[:300]})"
            if t.finished:  # its result stands: the table goes on, and verification reports the message
                log.error("table %s: coup %s: %s: passed over", t.name, t.coup, why)
            else:
                self._hold(t, m.seq, why)
        else:
            self.repository.take(t, m.seq, m.batch)

    @staticmethod
    def _not_followed(t: TableCoup, batch: Batch) -> str:
        """Why a recorded batch cannot be taken into the coup as it stands ("" where it can): a
        second opening, no opening first, or decisions that are not what the coup's rules give
        from its state (each decided again, as verification decides it: ``verify.redecided``;
        where the coup was dealt under a ruleset other than the table's now, taken as recorded)."""
        opening = [e for e in batch.events if isinstance(e.data, CoupConfigured)]
        if opening and t.state is not None:
            return "a second coup.configured in one coup"
        if t.state is None and not opening:
            return "the coup's record does not begin with its coup.configured"
        rest = [e for e in batch.events if not isinstance(e.data, NOT_OF_THE_GAME)]
        digest_ = opening[0].data.ruleset_digest if opening and isinstance(opening[0].data, CoupConfigured) \
            else t.dealt_under
        if not rest or digest_ != rulesets.digest_of(t.rules):
            return ""
        try:
            _, differs = verify.redecided(t.game, t.rules, t.game.new() if opening else t.game.copy(t.state), rest)
        except Exception as exc:  # events no rules give, nor follow
            return f"{type(exc).__name__}: {exc}"
        return differs

    @staticmethod
    def _hold(t: TableCoup, seq: int, why: str) -> None:
        t.held, t.held_seq = why, seq
        log.error("table %s: coup %s is held for compliance: %s", t.name, t.coup or "?", why)

    # ---- deciding -------------------------------------------------------

    def _decide(self, t: TableCoup, command: object) -> list[AnyEvent]:
        if t.state is None:
            raise RuleViolation("coup", "no coup is open at this table")
        return t.game.decide(t.rules, t.state, command)

    def waiting(self, t: TableCoup) -> commands.Waiting:
        if t.held:
            return commands.Waiting("held") if t.incident is None else commands.Waiting("ruling", incident=t.incident.kind)
        if t.state is None:
            return commands.Waiting("open")
        waits = t.game.waiting(t.rules, t.state)
        if waits.kind == "card" and t.config.source:  # the card-reading shoe's next card, for whom it is due
            return msgspec.structs.replace(waits, kind="read")
        return waits

    def _reply(self, t: TableCoup) -> commands.Reply:
        return commands.Reply(True, coup=t.coup, shoe=t.shoe, waiting=self.waiting(t))

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
                self._unstage(t)  # whatever could not be recorded did not happen

    async def _handle(self, t: TableCoup, cmd: commands.PolicyCommand) -> commands.Reply:
        if (name := getattr(cmd, "supervisor", "")) and t.config.supervisors and name not in t.config.supervisors:
            raise RuleViolation("roster", f"{name} is not on the casino's roster of supervisors "
                                f"({', '.join(t.config.supervisors)}): a direction is taken from a supervisor on it")
        if isinstance(cmd, commands.CardRead | commands.CutCardRead):
            await reading.report(self, t, cmd)
            return self._reply(t)
        if isinstance(cmd, commands.Rule):
            await reading.rule(self, t, cmd)
            return self._reply(t)
        if isinstance(cmd, commands.Status):
            if t.state is not None and self.waiting(t).kind in ("card", "pass"):
                # The dealer's own step, left half-taken (its instance stopped, or the table moved
                # between instances as it stepped): taken now, beside the answer.
                self._resume_later([t.name])
            return self._reply(t)
        if isinstance(cmd, commands.OpenCoup):
            if t.state is not None and t.recorded(cmd):
                # A retry (the first attempt may have been answered before the book opened): answered
                # with the coup it opened, even once another terminal has dealt that coup to its end,
                # never by opening another.
                if t.state.phase == "betting":
                    await self._book_open(t)
                return self._reply(t)
            if (earlier := self._opened_earlier(t, cmd.id)) is not None:
                raise RuleViolation("command id", f"command id {cmd.id} opened coup {earlier} already, and "
                                    f"{t.coup} has opened since: a new coup takes a new command id")
            if cmd.number and cmd.number != t.number + 1:
                raise RuleViolation("coup", f"command id {cmd.id} opens coup number {cmd.number}, and the table's "
                                    f"next is {t.number + 1} ({t.coup or 'no coup'} the latest): a new coup "
                                    "takes a new command id")
            if not t.finished:
                raise RuleViolation("coup", f"coup {t.coup} is still being dealt")
            if t.incident is not None:
                raise RuleViolation(commands.HELD, f"coup {t.coup} is held for a supervisor's ruling: {t.held}")
            await self._open(t, cmd)
            return self._reply(t)
        if cmd.coup == t.coup and t.held:
            raise RuleViolation(commands.HELD, f"coup {t.coup} is held for compliance, nothing more is dealt in it: "
                                f"{t.held}; the table goes on with its next coup")
        if cmd.coup != t.coup or t.state is None:
            raise RuleViolation("coup", f"coup {cmd.coup} is not the coup being dealt at {cmd.table}")
        if isinstance(cmd, commands.CloseBetting) and t.state.phase == "betting":
            await self._book_open(t)  # the book a coup is dealt from is open before it closes
        if not t.recorded(cmd):  # a retried command was recorded once already
            await self._command(t, cmd)
        await self.advance(t)  # and the dealer's own steps are finished either way
        return self._reply(t)

    @staticmethod
    def _opened_earlier(t: TableCoup, command_id: str) -> str | None:
        """The coup before the latest that ``command_id`` opened, among those
        the latest coup's record names (an opening is applied once, asked
        again whenever); None if it opened none of them."""
        digest_ = commands.id_digest(command_id)
        for back, opened in enumerate(t.openings[1:], start=1):
            if opened == digest_:
                return f"{t.name}-{t.number - back:06d}"
        return None

    async def _open(self, t: TableCoup, cmd: commands.OpenCoup) -> None:
        if forged := [a for a in cmd.approvals if not a.held_by(t.config.approvals)]:
            # An approval is the casino's (its tables file), never a terminal's say-so.
            raise RuleViolation("approvals", f"{forged[0].what} approved by {forged[0].by} {forged[0].reference} is "
                                             f"not among table {t.name}'s approvals in the casino's configuration")
        number = t.number + 1
        coup = f"{t.name}-{number:06d}"
        carry = self._carry_from(t)
        # Refused before the shoe is asked anything, so that a refused opening writes nothing (the style
        # in force on a card shoe, 001 8.5, is checked once the round names the shoe it is dealt from).
        t.game.decide(t.rules, t.game.new(), t.game.opening(t.rules, t.config, coup, cmd.procedure, carry, "",
                                                            cmd.supervisor))
        # The last coup's round ends at the shoe before the next starts: most often the shoe started
        # this coup's round as it ended the last (docs/clauses.md, "The next round"), else it starts it now.
        ended = None
        if t.held:
            await self._end_held(t)
        elif t.state is not None:
            ended = await self._end_round(t)
        start = ended if ended is not None and ended.coup == coup else await self.peer.must(
            subjects.command(t.name, "shoe"), commands.StartRound(f"{coup}:start", t.name, coup, t.config.ruleset, t.config.source))
        opening = t.game.opening(t.rules, t.config, coup, cmd.procedure, carry, start.shoe, cmd.supervisor)
        recorded = await self._record_ruleset(t)
        events: list[AnyEvent] = [CoupConfigured(t.name, t.game.name, t.config.ruleset, recorded, number,
                                                 t.openings[:OPENINGS_KEPT], t.config.currency,
                                                 t.config.supervisors, cmd.dealer or t.dealer, t.dealer)]
        events += t.game.decide(t.rules, t.game.new(), opening)  # refused here: nothing has changed
        self._keep(t)  # the coup before, put back if the opening is not recorded
        self._next_coup(t)
        t.coup, t.shoe = coup, start.shoe
        # The id names the table and the command, not the coup: another instance opening this number for
        # another command loses the race (the guard), and this command written once opens no other coup.
        self._stage(t, events, commands.opening_id(t.name, cmd.id), cmd.id, commands.digest(cmd))
        t.staged.opening = cmd.id
        await self._flush(t)
        # Answered once its book is open, so that an opening answered takes wagers. Opened and its book
        # not yet, the refusal says so: the same command asked again is answered once the book is open.
        await self._book_open(t)

    async def _end_held(self, t: TableCoup) -> None:
        """A held coup recorded as held (``coup.held``), and its round ended at
        the shoe with the cards the shoe drew for it, in the order drawn (a
        house rule: docs/clauses.md, "A coup held for compliance"), so that
        the table goes on with its next coup. A round the shoe is not dealing
        (never started, or ended) has nothing to end."""
        if not t.held_recorded:
            ack = await self.repository.recorder.record(
                subjects.event(t.name, t.shoe, t.coup, "coup"), [CoupHeld(t.name, t.coup, t.held_seq, t.held)],
                expected=t.last_seq, msg_id=f"{t.coup}:held", table=t.name, shoe=t.shoe, coup=t.coup,
                causation=f"{t.coup}:held")
            t.held_recorded = True
            t.last_seq, t.seen = max(t.last_seq, ack.seq), max(t.seen, ack.seq)
        drawn = [e.data for m in await self.store.read(subjects.event(t.name, "*", t.coup, "shoe"))
                 for e in m.batch.events if isinstance(e.data, CardDrawn) and e.data.coup_id == t.coup]
        reply = await self.peer.ask(subjects.command(t.name, "shoe"), commands.EndRound(
            f"{t.coup}:end", t.name, t.coup, t.config.ruleset, tuple(c.card for c in drawn), source=t.config.source))
        if not reply.ok:
            log.info("table %s: held coup %s has no round to end at the shoe (%s)", t.name, t.coup, reply.reason)

    async def _record_ruleset(self, t: TableCoup) -> str:
        """The digest of the table's ruleset, its full content recorded at the
        table first if the table's last recorded ruleset is not this one (the
        first coup, or the file changed): the record says what every coup was
        dealt under without our files. Another instance recording it at the
        same moment fails the append's guard, and the command is decided again."""
        digest_ = rulesets.digest_of(t.rules)
        if t.ruleset_recorded == digest_:
            return digest_
        subject = subjects.event(t.name, "", "", "ruleset")
        last = await self.store.last(subject)
        latest = last.batch.events[-1].data if last is not None and last.batch.events else None
        if not (isinstance(latest, RulesetRecorded) and latest.digest == digest_):
            after = last.seq if last is not None else 0
            await self.repository.recorder.record(
                subject, [RulesetRecorded(t.name, t.config.ruleset, digest_, rulesets.content(t.rules))],
                expected=after,
                msg_id=f"{t.name}:ruleset:{after}:{digest_}", table=t.name, shoe=subjects.NO_COUP,
                coup=subjects.NO_COUP, causation=f"{t.name}:ruleset:{digest_}")
        t.ruleset_recorded = digest_
        return digest_

    def _book(self, t: TableCoup) -> asyncio.Future[Any]:
        """The coup's wager book being opened: asked until the wager service
        answers (asked again, it answers from its record), in the background,
        so that a coup opened while the wager service is away gets its book
        as soon as it is back, with no restart of anything."""
        if t.booking is None or t.booking_for != t.coup or _failed(t.booking):
            t.booking_for = t.coup
            t.booking = asyncio.ensure_future(self._ask_until_answered(
                subjects.command(t.name, "book"), commands.OpenBook(
                    f"{t.coup}:open-book", t.name, t.coup, t.shoe, t.config.ruleset, _previous_coup(t.name, t.number))))
            t.booking.add_done_callback(_logged("a coup's wager book was refused by the wager service"))
        return t.booking

    async def _book_open(self, t: TableCoup) -> None:
        """Until the coup's wager book is open, for ``BOOK_WAIT`` seconds at most."""
        try:
            await asyncio.wait_for(asyncio.shield(self._book(t)), BOOK_WAIT)
        except TimeoutError:
            raise RuleViolation(commands.WAGER_SERVICE, f"coup {t.coup} is open and its wager book not yet: the wager "
                                "service has not answered (it is asked until it does); ask again") from None

    async def _ask_until_answered(self, subject: str, command: commands.OpenBook) -> None:
        while True:
            try:
                await self.peer.must(subject, command)
                return
            except RuntimeError as exc:  # no answer: the wager service is away
                log.warning("%s: %s; asked again", command.id, exc)
                await asyncio.sleep(1.0)

    async def _command(self, t: TableCoup, cmd: commands.CoupCommand) -> None:
        if isinstance(cmd, commands.CloseBetting):
            book = await self.peer.must(subjects.command(t.name, "book"),
                                        commands.CloseBook(f"{t.coup}:close-book", t.name, t.coup))
            closing = t.game.close_betting(book.wagers)
            self._stage(t, self._decide(t, closing), f"{t.coup}:close", cmd.id, commands.digest(cmd))
            return
        rule_cmd = t.game.from_terminal(cmd)
        self._stage(t, self._decide(t, rule_cmd), commands.write_id(t.coup, cmd.id), cmd.id, commands.digest(cmd))
        # A player's choice is recorded before anything it calls for is done at
        # another service (a card drawn, an extra stake booked): two terminals
        # racing with different choices, the loser's would otherwise be drawn
        # or booked for a choice never recorded. (Closing the betting is the
        # same whoever asks, and goes with the deal in one batch.)
        await self._flush(t)

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
        while True:
            w = self.waiting(t)
            if w.kind == "card":
                index, count = t.game.cards_dealt(t.state), t.game.cards_due(t.state)
                drawn = await self.peer.must(subjects.command(t.name, "shoe"), commands.DrawCard(
                    f"{t.coup}:draw:{index}", t.name, t.coup, t.config.ruleset, index, count,
                    t.game.by_tableau(t.state), t.game.dealer_run(t.state)))
                for i, (card, position) in enumerate(zip(drawn.cards, drawn.positions, strict=True)):
                    deal = t.game.deal(card, position, self.waiting(t).seat)
                    self._stage(t, self._decide(t, deal), f"{t.coup}:card:{index + i}", f"{t.coup}:draw:{index}")
            elif w.kind == "pass" and w.hand is not None:
                self._stage(t, self._decide(t, t.game.pass_cards(w.hand)), f"{t.coup}:pass:{w.hand}", f"{t.coup}:pass:{w.hand}")
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
        if t.ending is not None and not _failed(t.ending):
            return
        t.ending = asyncio.ensure_future(self.peer.must(subjects.command(t.name, "shoe"), commands.EndRound(
            f"{t.coup}:end", t.name, t.coup, t.config.ruleset, _pickup(t.state), next=f"{t.name}-{t.number + 1:06d}",
            source=t.config.source)))
        t.ending.add_done_callback(_logged("a round's end at the shoe failed (asked again before the next coup)"))

    async def _end_round(self, t: TableCoup) -> commands.Reply:
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
            del self.tables[name]

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
                        self._unstage(self.tables[name])

    async def _resume(self, t: TableCoup) -> None:
        assert t.state is not None
        if t.held:  # nothing is dealt in it; the next opening ends its round
            return
        if t.finished:  # its round's end asked again (the shoe answers one ended already as done)
            self._ask_end_round(t)
            return
        await self.peer.must(subjects.command(t.name, "shoe"),
                             commands.StartRound(f"{t.coup}:start", t.name, t.coup, t.config.ruleset,
                                                 t.config.source))
        if t.state.phase == "betting":
            await self._book_open(t)
        else:
            await self.advance(t)


def _previous_coup(table: str, number: int) -> str:
    """The table's coup before its coup ``number``, as the dealer-policy names them."""
    return f"{table}-{number - 1:06d}" if number > 1 else ""


def _failed(asked: asyncio.Future[Any]) -> bool:
    return asked.done() and (asked.cancelled() or asked.exception() is not None)


def _logged(what: str) -> Callable[[asyncio.Future[Any]], None]:
    """A done-callback logging ``what`` failed, with why."""
    def log_failure(asked: asyncio.Future[Any]) -> None:
        if not asked.cancelled() and (exc := asked.exception()) is not None:
            log.warning("%s: %s", what, exc)

    return log_failure


def _pickup(state: Coup | None) -> tuple[str, ...]:
    """The cards in the order they were picked up (002 (8), 003 7.7)."""
    assert state is not None
    return state.pickup

