"""A table's unit of work at the dealer-policy: what one command (or one
resumed step) decides at one table, its lock held, staged and recorded as
batches of the table's coup, and unstaged on any exit (the service's
``working``): whatever could not be recorded did not happen. Every handler
(the coup's own commands here; openings in services.dealer_policy.opening,
a card-reading shoe's in services.dealer_policy.reading) works through it
alone, and it reaches the world through the service's ports: the event
store, the shoe and wager services, the metrics."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import msgspec

from casino.games import RESULTS, Coup, Step
from casino.metrics import Metrics, count_recorded
from casino.protocol import commands
from casino.protocol.service import Peer, log
from casino.rules.errors import RuleViolation
from casino.rules.shoe import ROUND
from casino.store import subjects
from casino.store.envelope import AnyEvent, Batch
from casino.store.eventstore import Conflict, EventStore, Stored
from services.dealer_policy.sources import draw_id
from services.dealer_policy.table import TableCoup, before_opening, follow, refused
from services.repository import Repository


class Ports:
    """What the dealer-policy reaches the world through."""

    def __init__(self, store: EventStore, peer: Peer, repository: Repository[TableCoup]) -> None:
        self.store, self.peer, self.repository = store, peer, repository
        self.metrics: Metrics | None = None


class Dealing:
    """One table's unit of work (its lock held by whoever made it)."""

    def __init__(self, ports: Ports, t: TableCoup) -> None:
        self.ports, self.t = ports, t
        self.peer, self.store, self.repository = ports.peer, ports.store, ports.repository
        self.shoe_heard = False  # whether the shoe service has answered in this unit of work (``ask_shoe``)

    @property
    def metrics(self) -> Metrics | None:
        return self.ports.metrics

    # ---- the record -----------------------------------------------------

    async def caught_up(self) -> None:
        """The table's coup as the record has it, whichever instance wrote it:
        before a decision no append of its own guards (a card-reading shoe's
        card taken as what the coup waits for)."""
        t = self.t

        async def follow_locked(subject: str, seq: int, batch: Batch) -> None:
            follow(self.repository, t, Stored(seq, subject, batch))

        await self.repository.catch_up(subjects.aggregate_filter("coup", t.name), t.seen, follow_locked,
                                       lambda m: follow(self.repository, t, m))

    def stage(self, events: list[AnyEvent], msg_id: str, causation: str, command: str = "", shoe: str = "") -> None:
        """Take a decision now (the coup moves on) and record it with the next
        ``flush``; ``command`` is the digest of the terminal's command that
        caused it. Between coups it goes into the next coup's record, before
        that coup's opening (``TableCoup.place``), under ``shoe``: the shoe
        its card came from."""
        t = self.t
        self.repository.keep(t, wide=t.finished)
        if not t.staged.steps and before_opening(events):
            t.staged.filed, t.staged.shoe = t.next_coup, shoe
        if t.staged.filed:
            t.prelude, t.prelude_of = {**(t.prelude if t.prelude_of == t.staged.filed else {}),
                                       causation: command}, t.staged.filed
        self.repository.stage(t, events, msg_id, causation, command)

    async def flush(self) -> None:
        """Append every staged decision as one batch, guarded on the coup's
        subject; a coup's opening, or a write to a finished coup, on every
        coup subject of the table (expecting the last this instance has seen):
        what a coup leaves to the next (the shoe holder, 000 8.18) is decided
        on the whole of it, so the next is opened only by an instance that has
        seen the last write to the coup before, and nothing is written to a
        coup once the next is open."""
        t = self.t
        opened, events = t.staged.opening, [e for evs, _, _, _ in t.staged.steps for e in evs]
        written = t.staged.steps[0][1] if t.staged.steps else ""
        guard, expected = (subjects.aggregate_filter("coup", t.name), t.seen) if t.staged.wide else (None, t.last_seq)
        # What is recorded between coups is filed under the next coup, and the shoe its card came from.
        coup, shoe = (t.staged.filed, t.staged.shoe or t.shoe_seen) if t.staged.filed else (t.coup, t.shoe)
        ack = await self.repository.flush(t, subjects.event(t.name, shoe, coup, "coup"), expected=expected,
                                          guard=guard, table=t.name, shoe=shoe, coup=coup)
        if ack is None:
            return
        if ack.duplicate and opened:
            # The stream holds an opening by this command already (its message id is the table's and the
            # command's): this one did not open a coup.
            raise RuleViolation("command id", f"command id {opened} opened a coup of table {t.name} already "
                                "(one of its earlier coups): a new coup takes a new command id")
        if ack.duplicate:
            # The step was recorded before: by this decision asked again, or by another instance that
            # decided it on a record this one had not seen, perhaps otherwise (another card to another
            # hand). Undone here; the command is decided again on the record read back.
            raise Conflict(f"{written} is recorded already (seq {ack.seq}): the record stands, not this decision")
        t.awaiting_card = 0.0  # the coup has moved: what it waits for, it waits for from now
        count_recorded(self.metrics, t.name, events, t.procedure)
        t.seen = max(t.seen, ack.seq)
        await self._stake()  # the extra stakes of the choices this append recorded

    async def commit(self, events: list[AnyEvent], msg_id: str, causation: str, command: str = "",
                     shoe: str = "") -> None:
        self.stage(events, msg_id, causation, command, shoe)
        await self.flush()

    async def record_aside(self, subject: str, events: list[AnyEvent], *, expected: int, msg_id: str,
                           causation: str) -> None:
        """Record what belongs to the table but to no coup (its ruleset),
        guarded on its own subject: another instance's write there first fails
        the guard, and the command is decided again."""
        await self.repository.recorder.record(subject, events, expected=expected, msg_id=msg_id, table=self.t.name,
                                              shoe=subjects.NO_COUP, coup=subjects.NO_COUP, causation=causation)

    # ---- deciding -------------------------------------------------------

    def decide(self, command: object) -> list[AnyEvent]:
        t = self.t
        if t.state is None:
            raise RuleViolation("coup", "no coup is open at this table")
        return t.game.decide(t.rules, t.state, command)

    def waiting(self) -> commands.Waiting:
        t = self.t
        if t.incidents.closed:  # until a supervisor reopens it
            return commands.Waiting("closed", reason=t.incidents.closed)
        if (incident := t.incident) is not None:  # the first held for, in the coup or before the next opens
            keying = incident.kind == "unread" and not t.incidents.keyed
            return commands.Waiting("key" if keying else "ruling", incident=incident.kind,
                                    house_rule=incident.house_rule)
        if t.shuffling and (t.finished or t.game.waiting(t.rules, t.state).kind == "card"):
            return commands.Waiting("shuffle")  # for the card-reading shoe's next order
        if t.stopped:  # held for compliance, or void
            return commands.Waiting("held")
        if t.state is None:
            return commands.Waiting("open")
        return t.cards.told(t.game.waiting(t.rules, t.state))

    def reply(self) -> commands.Reply:
        waiting = self.waiting()
        if self.metrics is not None:
            self.t.awaiting_card = self.t.cards.replied(self.metrics, self.t.name, waiting, self.t.awaiting_card)
        return commands.Reply(True, coup=self.t.coup, shoe=self.t.shoe, waiting=waiting)

    async def advance(self) -> None:
        """Take every step the dealer takes without waiting for a player
        (``Game.next_step``): draw the cards due from the table's card source
        (as many at once as are certainly due, and the run the game's rule
        goes on by), pass the cards due, and end the round at the shoe. The
        steps taken are recorded as one batch before anyone is waited for."""
        t = self.t
        await self._stake()
        while t.state is not None and not t.stopped:
            step = t.game.next_step(t.rules, t.state)
            if step.kind == "pass" and step.waiting.hand is not None:
                hand = step.waiting.hand
                passed = self.decide(t.game.pass_cards(hand))
                if self._unbooked() and any(isinstance(e, RESULTS) for e in passed):
                    await self._booked_first()
                self.stage(passed, f"{t.coup}:pass:{hand}", f"{t.coup}:pass:{hand}")
                continue
            asked = draw_id(t.coup, step, t.next_coup)
            if step.kind == "draw" and (drawn := await self._draw(step, asked)) is not None:
                if self._unbooked() and self._settles(drawn):
                    await self._booked_first()
                if drawn.carried:  # the shoe's record of the draw, carried in the same append as the cards dealt
                    self.stage(list(drawn.carried), f"{t.coup}:drawn:{step.first}", asked)
                for i, (card, position) in enumerate(zip(drawn.cards, drawn.positions, strict=True)):
                    deal = t.game.deal(card, position, t.game.next_step(t.rules, t.state).waiting.seat)
                    self.stage(self.decide(deal), f"{t.coup}:card:{step.first + i}", asked)
                continue
            if step.kind == "finished":
                await self._finish()
                return
            break
        await self.flush()

    async def _draw(self, step: Step, asked: str) -> commands.Reply | None:
        """The cards of a draw (``asked``: its id, ``sources.draw_id``) from the
        table's card source, or None: the coup waits for them."""
        try:
            t = self.t
            ask = commands.DrawCard(asked, t.name, t.coup, t.config.ruleset, step.first, step.due, step.run,
                                    t.next_coup, t.last_read, unrecorded=bool(t.staged.steps),
                                    after_digest=t.after_digest)
            try:
                return await t.cards.draw(self.peer, ask)
            except RuleViolation as exc:
                if exc.clause != commands.RECORD_FIRST:
                    raise
            await self.flush()  # the shoe records this draw itself: the coup's steps before it are recorded first
            return await t.cards.draw(self.peer, msgspec.structs.replace(ask, after=t.last_read, unrecorded=False,
                                                                            after_digest=t.after_digest))
        except RuleViolation as exc:
            if exc.clause == ROUND:  # the shoe deals no round of this coup: a fault, for compliance
                await self.flush()
                refused(self.t, f"the shoe refused the coup's cards: {exc.reason}")
            raise

    async def _stake(self) -> None:
        """Book the extra stakes (double, split, insurance) of the coup's
        recorded choices not yet booked (after a restart, all of them: the
        wager book answers one booked already as done). A choice staged is
        booked once the append that carries it is recorded (``flush``): of
        two terminals racing with different choices, the loser's is never
        booked."""
        t = self.t
        staged = {cause for _, _, cause, _ in t.staged.steps}
        for cause, extra in list(t.extras.items()):
            if cause not in t.staked and cause not in staged:
                await self.peer.must(subjects.command(t.name, "book"), extra)
                t.staked.add(cause)

    def _unbooked(self) -> bool:
        """Whether a choice of the coup's calls for an extra stake not yet booked."""
        return any(cause not in self.t.staked for cause in self.t.extras)

    async def _booked_first(self) -> None:
        """Before a step of the dealer's that gives the coup its result, where
        a choice calls for a stake not yet booked: what is staged recorded,
        and the stake booked. The wager book holds every stake a coup played
        with before its result is recorded (``games.payouts_of``)."""
        await self.flush()
        await self._stake()  # what the record held already, where nothing was staged

    def _settles(self, drawn: commands.Reply) -> bool:
        """Whether the cards drawn, dealt, give the coup its result (decided on a copy)."""
        t = self.t
        state = t.game.copy(t.state)
        for card, position in zip(drawn.cards, drawn.positions, strict=True):
            deal = t.game.deal(card, position, t.game.next_step(t.rules, state).waiting.seat)
            events, state = t.game.step(t.rules, state, deal)
            if any(isinstance(e, RESULTS) for e in events):
                return True
        return False

    # ---- the other services ---------------------------------------------

    async def ask_shoe(self, command: commands.ShoeCommand) -> commands.Reply:
        """Ask the shoe service for the table; what it says of the table's
        card-reading shoe kept: whether it waits for its shuffling machine's
        order (``Waiting`` ``shuffle``), and the shoe in play."""
        t = self.t
        try:
            reply = await self.peer.must(subjects.command(t.name, "shoe"), command)
        except RuleViolation as exc:
            self.shoe_heard = self.shoe_heard or exc.clause == commands.SHUFFLING_MACHINE
            t.shuffling = t.shuffling or exc.clause == commands.SHUFFLING_MACHINE
            raise
        self.shoe_heard = True
        t.shuffling = reply.waiting is not None and reply.waiting.kind == "shuffle"
        t.shoe_seen = reply.shoe or t.shoe_seen
        return reply

    async def _finish(self) -> None:
        """The coup finished in this unit of work: its round ended at the shoe
        in the same append as its result, the shoe's record of the end
        carried, where the shoe can (nothing of its own follows: a reshuffle);
        else the result recorded and the round's end asked beside the answer
        (``ask_end_round``), as it is where the shoe is away."""
        t = self.t
        if t.ending is None and t.staged.steps and t.round_ended != t.coup:
            ask = self._end_round_command(unrecorded=True)
            try:
                reply = await self.peer.must(subjects.command(t.name, "shoe"), ask)
            except Exception as exc:  # asked again once the result is recorded
                log.info("table %s: coup %s's round's end not carried with its result: %s", t.name, t.coup, exc)
            else:
                if reply.carried:
                    self.stage(list(reply.carried), f"{t.coup}:ended", ask.id)
                await self.flush()
                t.ending = asyncio.get_running_loop().create_future()
                t.ending.set_result(reply)
                return
        await self.flush()
        self.ask_end_round()

    def _end_round_command(self, unrecorded: bool = False) -> commands.EndRound:
        t = self.t
        return commands.EndRound(f"{t.coup}:end", t.name, t.coup, t.config.ruleset, _pickup(t.state),
                                 next=f"{t.name}-{t.number + 1:06d}", after=t.last_read, unrecorded=unrecorded,
                                 after_digest=t.after_digest)

    def ask_end_round(self) -> None:
        """Ask the shoe to end the finished coup's round (its cards to the
        discard rack) while the terminal is answered: the result is recorded,
        and the next coup at the table waits for the round's end (``end_round``).
        Asked again if a first asking failed."""
        t = self.t
        if t.ending is not None and not failed(t.ending):
            return
        t.ending = asyncio.ensure_future(self.peer.must(subjects.command(t.name, "shoe"), self._end_round_command()))
        t.ending.add_done_callback(logged("a round's end at the shoe failed (asked again before the next coup)"))

    async def end_round(self) -> commands.Reply:
        """Until the finished coup's round has ended at the shoe: the shoe's
        answer (naming the next coup and its shoe where it started its round
        too). Another instance may have finished the coup: the shoe answers a
        round already ended as done."""
        self.ask_end_round()
        assert self.t.ending is not None
        reply: commands.Reply = await asyncio.shield(self.t.ending)
        return reply


async def play(w: Dealing, cmd: Any) -> None:
    """A terminal's command to the coup being dealt (closing the betting, an
    answer, a decision): decided once however often it is asked, and the
    dealer's own steps after it taken either way."""
    t = w.t
    if cmd.coup == t.coup and t.stopped:
        why = f"is held for compliance, nothing more is dealt in it: {t.held}" if t.held else t.stopped
        raise RuleViolation(commands.HELD, f"coup {t.coup} {why}"
                            + ("; the table goes on with its next coup" if not t.incidents.holding else ""))
    if cmd.coup != t.coup or t.state is None:
        raise RuleViolation("coup", f"coup {cmd.coup} is not the coup being dealt at {cmd.table}")
    if not t.recorded(cmd):  # a retried command was recorded once already
        await _command(w, cmd)
    await w.advance()  # and the dealer's own steps are finished either way


async def _command(w: Dealing, cmd: commands.CoupCommand) -> None:
    t = w.t
    if isinstance(cmd, commands.CloseBetting):
        book = await w.peer.must(subjects.command(t.name, "book"),
                                 commands.CloseBook(f"{t.coup}:close-book", t.name, t.coup))
        closing = t.game.close_betting(book.wagers)
        w.stage(w.decide(closing), f"{t.coup}:close", cmd.id, commands.digest(cmd))
    else:
        w.stage(w.decide(t.game.from_terminal(cmd)), commands.write_id(t.coup, cmd.id), cmd.id, commands.digest(cmd))
    # The command is recorded with the dealer's steps after it, in one append:
    # the cards it calls for are the shoe's record only once that append
    # carries them (behind the betting closed, in the same message), and a
    # draw the shoe gave for a choice never recorded is in no record
    # (services.shoe.shoes, ``Shoes.settled``). An extra stake the choice
    # calls for is booked once that append is recorded (``Dealing._stake``).


def _pickup(state: Coup | None) -> tuple[str, ...]:
    """The cards in the order they were picked up (002 (8), 003 7.7)."""
    assert state is not None
    return state.pickup


def failed(asked: asyncio.Future[Any]) -> bool:
    return asked.done() and (asked.cancelled() or asked.exception() is not None)


def logged(what: str) -> Callable[[asyncio.Future[Any]], None]:
    """A done-callback logging ``what`` failed, with why."""
    def log_failure(asked: asyncio.Future[Any]) -> None:
        if not asked.cancelled() and (exc := asked.exception()) is not None:
            log.warning("%s: %s", what, exc)

    return log_failure
