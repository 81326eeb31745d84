"""The shoe service's handlers, each named by its command's type
(``ShoeService.handlers``), over the tables' shoes it holds (services.shoe.shoes):
a round started, the cards a step draws, a round ended; a card-reading
shoe's reports and its machine's orders (services.shoe.readers)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec

from casino.protocol.commands import (
    RECORD_FIRST,
    DrawCard,
    EndRound,
    EndShoeNow,
    Reply,
    ShoeCommand,
    ShoeStatus,
    ShuffleMade,
    StartRound,
    TakeRead,
)
from casino.rules import shoe as dealing_shoe
from casino.rules.cards import Card
from casino.rules.errors import RuleViolation
from casino.rules.runs import end_of
from casino.store import subjects
from services.shoe import readers
from services.shoe.carrying import carries, give, given_of
from services.shoe.shoes import Shoes, not_next


class ShoeService(Shoes):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handlers: dict[type, Callable[[Any], Awaitable[Reply]]] = {
            StartRound: self._start_round, DrawCard: self._draw, EndRound: self._end_round,
            TakeRead: functools.partial(readers.take, self), ShuffleMade: functools.partial(readers.shuffle_made, self),
            EndShoeNow: functools.partial(readers.end_now, self), ShoeStatus: functools.partial(readers.status, self)}

    async def handle(self, cmd: ShoeCommand | ShuffleMade) -> Reply:
        if (handler := self.handlers.get(type(cmd))) is None:
            raise RuleViolation("protocol", f"unknown shoe command {type(cmd).__name__}")
        return await handler(cmd)

    async def _start_round(self, cmd: StartRound) -> Reply:
        t = await self.confirmed(cmd.table, await self.table(cmd.table, cmd.ruleset), cmd.after,
                                 cmd.after_digest)
        if t.state.round == cmd.coup and not t.state.active:
            # Started as the last round ended, and the shoe ended since (a ruling): the next filled first.
            await self.reshuffle(cmd.table, t, subjects.NO_COUP, cmd.id)
        if t.state.round == cmd.coup or t.last_round == cmd.coup:  # asked again
            return Reply(True, coup=cmd.coup, shoe=t.state.shoe_id or "", carried=given_of(t, cmd.id))
        if t.state.round is not None:
            raise RuleViolation("shoe", f"round {t.state.round} has not ended")
        if (wrong := not_next(cmd.coup, t.last_round)) is not None:
            # A stale dealer (another instance moved the table on) never deals a coup twice, and no
            # round is started for a coup that cannot be the table's next (it would hold the shoe).
            raise RuleViolation("shoe", wrong)
        if not t.state.ready_for_round and (t.state.reshuffle or not t.state.active):
            await self.reshuffle(cmd.table, t, subjects.NO_COUP, cmd.id)
        events = dealing_shoe.decide(t.rules, t.state, dealing_shoe.StartRound(cmd.coup), t.document)
        if cmd.unrecorded and carries(t, events):  # the opening's append records it
            give(t, cmd.id, events, cmd.id)
        else:
            await self.commit(cmd.table, t, events, cmd.coup, f"{cmd.coup}:start", cmd.id)
        return Reply(True, coup=cmd.coup, shoe=t.state.shoe_id or "", carried=given_of(t, cmd.id))

    async def _end_round(self, cmd: EndRound) -> Reply:
        t = await self.confirmed(cmd.table, await self.table(cmd.table, cmd.ruleset), cmd.after,
                                 cmd.after_digest, cmd.unrecorded)
        t = await self.settled(cmd.table, t)  # a card given the coup, and not in its record, is in none
        ended_in = t.state.shoe_id or ""
        # Else asked again (or ended by its run's draw), perhaps once the next round has started (a held
        # coup's: once it has ended).
        if t.last_round != cmd.coup and not (cmd.held and t.last_round > cmd.coup):
            ending = dealing_shoe.EndHeld(cmd.coup) if cmd.held else dealing_shoe.EndRound(cmd.coup, cmd.pickup)
            events = self.ending(t, t.state, ending, cmd.coup, cmd.next)
            if cmd.unrecorded and not cmd.held and carries(t, events):  # the coup's append, with its result
                give(t, cmd.id, events, cmd.id)
            elif cmd.unrecorded:
                raise RuleViolation(RECORD_FIRST, f"coup {cmd.coup}'s round's end is recorded by the shoe itself (a "
                                                  "reshuffle follows it): the coup's result is recorded first")
            else:
                await self.commit(cmd.table, t, events, cmd.coup, f"{cmd.coup}:end", cmd.id)
                await self.reshuffled_after(cmd.table, t, cmd.id)
        carried = given_of(t, cmd.id)
        if cmd.next is not None and t.state.round == cmd.next and t.state.active:
            return Reply(True, coup=cmd.next, shoe=t.state.shoe_id or "", carried=carried)
        return Reply(True, coup=cmd.coup, shoe=ended_in, carried=carried)

    async def _draw(self, cmd: DrawCard) -> Reply:
        t = await self.confirmed(cmd.table, await self.table(cmd.table, cmd.ruleset), cmd.after,
                                 cmd.after_digest, cmd.unrecorded)
        if t.pending != cmd.id or t.pending_draw != _asked(cmd):  # a step given, not in the coup's record: in none
            t = await self.settled(cmd.table, t)
        if t.state.round != cmd.coup:
            if t.last_round == cmd.coup and t.ended is not None and cmd.index < _last(cmd, t.ended[2]) <= len(t.ended[2]):
                return _drawn(cmd, *t.ended, given_of(t, cmd.id))  # asked again once its run ended the round
            raise RuleViolation(dealing_shoe.ROUND, f"coup {cmd.coup} is not the round being dealt")
        if cmd.count < 1:
            raise RuleViolation("protocol", f"a draw is of one card or more, not {cmd.count}")
        while len(t.state.layout) < _last(cmd, t.state.layout):  # not drawn yet (asked again: the same cards)
            first = len(t.state.layout)
            if cmd.index > first or t.order is None:
                raise RuleViolation("shoe", f"card {cmd.index} of coup {cmd.coup} is not the next card")
            state, events = dealing_shoe.copy(t.state), []  # the shoe's own state moves on once recorded
            while len(state.layout) < _last(cmd, state.layout):
                if state.position >= len(t.order[0]):
                    raise RuleViolation("shoe", f"shoe {state.shoe_id} has no card left for coup {cmd.coup}: the "
                                                "ruleset's penetration leaves too few cards behind the cut card")
                step = dealing_shoe.decide(t.rules, state, dealing_shoe.Draw(cmd.coup, t.order[0][state.position]), t.document)
                if not any(isinstance(e, dealing_shoe.CardDrawn) for e in step):
                    break
                for e in step:
                    state = dealing_shoe.evolve(state, e)
                events += step
            # The run drew the coup's last cards: the round ends with them, in the same step.
            ended = self.run_ended(t, state, cmd.coup, cmd.run, cmd.index, cmd.count, cmd.next) if events else []
            drawn = _drawn(cmd, state.shoe_id or "", state.position - len(state.layout), tuple(state.layout))
            if carries(t, events + ended):  # the coup's append records them, with the cards dealt
                give(t, cmd.id, events + ended, cmd.id)
                t.pending_draw = _asked(cmd)
                return msgspec.structs.replace(drawn, carried=tuple(events + ended))
            if cmd.unrecorded:
                raise RuleViolation(RECORD_FIRST, f"coup {cmd.coup}'s draw is recorded by the shoe itself (a "
                                                  "reshuffle follows it): the coup's steps before it are recorded first")
            if ended:
                await self.commit(cmd.table, t, events + ended, cmd.coup, f"{cmd.coup}:draw:{first}", cmd.id)
                await self.reshuffled_after(cmd.table, t, cmd.id)
                return drawn
            if events:  # the cards drawn, as one batch
                await self.commit(cmd.table, t, events, cmd.coup, f"{cmd.coup}:draw:{first}", cmd.id)
            else:  # 003 7.9: the cut card came out first: reshuffle now
                await self.commit(cmd.table, t, step, cmd.coup, f"{cmd.coup}:cut:{t.state.shoe_id}", cmd.id)
                await self.reshuffle(cmd.table, t, cmd.coup, cmd.id)
        return _drawn(cmd, t.state.shoe_id or "", t.state.position - len(t.state.layout), tuple(t.state.layout),
                      given_of(t, cmd.id))


def _drawn(cmd: DrawCard, shoe: str, start: int, layout: tuple[Card, ...], given: tuple[Any, ...] = ()) -> Reply:
    """The cards ``cmd`` draws of a round whose cards are ``layout``, the
    first at position ``start`` of ``shoe`` (the round's cards lie together
    in the shoe), and the shoe's record of them ``given`` for the coup's
    append to carry."""
    end = _last(cmd, layout)
    return Reply(True, coup=cmd.coup, shoe=shoe, cards=layout[cmd.index:end],
                 positions=tuple(range(start + cmd.index, start + end)), carried=given)


def _asked(cmd: DrawCard) -> tuple[object, ...]:
    """What a draw asks for: a draw asked again under its id asks for the same;
    one that does not (a stale dealer's, for a choice never recorded) is another."""
    return cmd.coup, cmd.index, cmd.count, cmd.run, cmd.next


def _last(cmd: DrawCard, layout: Sequence[Card]) -> int:
    """One past the round's last card that ``cmd`` draws: ``count`` of them from
    ``index``, then each further card its run calls for (each known once the
    cards before it are drawn)."""
    return end_of(cmd.run, layout, cmd.index, cmd.count)
