"""The shoe's steps a coup's append carries (docs/architecture.md, "The
shoe's steps ride in the coup's append"): what the shoe gives for a coup's
step and holds pending until the coup's record confirms it, whether a step
goes in the coup's append at all, and the steps folded back from the
coups' records, each checked against the shoe's own facts."""

from __future__ import annotations

from typing import Any

from casino.protocol.service import log
from casino.rules import shoe as dealing_shoe
from casino.store.envelope import CARRIED, READ, Batch, carried_by
from casino.store.eventstore import Stored
from services.shoe.held import TableShoe, fold, refused_why


def give(t: TableShoe, step: str, events: list[dealing_shoe.AnyShoeEvent], causation: str) -> None:
    """A step decided for a coup's append to carry (``step`` names it): the
    shoe moves on with it at once, and waits for the coup's record to confirm it."""
    for event in events:
        fold(t, event, causation)
    t.given[step] = events
    t.pending = step


def given_of(t: TableShoe, step: str) -> tuple[Any, ...]:
    """The shoe's record of ``step``, where it gave it for the coup's append to carry (asked again: given again)."""
    return tuple(e for e in t.given.get(step, ()) if isinstance(e, CARRIED))


def carries(t: TableShoe, events: list[dealing_shoe.AnyShoeEvent]) -> bool:
    """Whether ``events``, decided on the shoe in play, go in the coup's append:
    each is a step of the coup's (``envelope.CARRIED``), and nothing of the
    shoe's own follows at once (a reshuffle, 002 (9), 003 7.8 and 7.9, is the
    shoe's own append, after them), and the round was opened from the shoe
    in play (the coup's messages are under the shoe it opened from)."""
    if not events or not all(isinstance(e, CARRIED) for e in events):
        return False
    if t.state.round is not None and t.state.round == t.went_on:
        return False  # the coup's record is under the shoe it opened from: the shoe in play records its own
    after = dealing_shoe.copy(t.state)
    for event in events:
        after = dealing_shoe.evolve(after, event)
    return not after.reshuffle or (after.reshuffle != "now" and after.round is not None)


def carry_into(t: TableShoe, seq: int, batch: Batch) -> None:
    """Fold the shoe's steps a coup's message carries (given by this instance
    or another: services.shoe.readers, services.shoe.service). A card carried
    is taken only where it is the shoe in play's next card, one its
    composition holds and its order has there, and a round's end only for
    the round being dealt: a coup's record is not the shoe's word, and what
    is not (a forged write; casino verify names it) is passed over, with the
    rest of its step."""
    if seq <= t.carried_seq:
        return
    t.carried_seq = seq
    steps: dict[str, list[tuple[dealing_shoe.AnyShoeEvent, str]]] = {}
    for env in batch.events:
        if isinstance(env.data, CARRIED):
            steps.setdefault(carried_by(env.data, env.causation), []).append((env.data, env.causation))
    for step, events in steps.items():
        if step in t.given and given_of(t, step) == tuple(e for e, _ in events):  # given by this instance: confirmed
            t.pending = "" if t.pending == step else t.pending
            continue
        if step in t.given or t.pending:
            # Another's decision under this step's name, or another's step recorded before the one given
            # here: what this instance gave was decided on a shoe the record does not hold.
            log.warning("shoe %s: seq %d carries another instance's step %s (given here: %s): the shoe is folded "
                        "again", t.state.shoe_id, seq, step, t.pending or step)
            t.stale = True
            return
        for e, causation in events:
            if (why := _not_given(t, e)) is not None:
                log.warning("shoe %s: seq %d carries %s, %s: passed over", t.state.shoe_id, seq, type(e).__name__, why)
                break
            fold(t, e, READ + e.read if isinstance(e, dealing_shoe.CardDrawn) and e.read else causation)
            t.given.setdefault(step, []).append(e)


def _not_given(t: TableShoe, e: dealing_shoe.AnyShoeEvent) -> str | None:
    """Why the shoe in play cannot have given ``e`` (None where it can)."""
    if e.shoe_id != t.state.shoe_id:
        return f"of shoe {e.shoe_id}, not the shoe in play"
    if isinstance(e, dealing_shoe.CardDrawn):
        if e.coup_id != t.state.round:
            return f"{e.card} for coup {e.coup_id}, not the round being dealt"
        if e.position != t.state.position or refused_why(t, e.card) is not None:
            return f"{e.card} at position {e.position}, not the shoe's next card"
    elif isinstance(e, dealing_shoe.RoundEnded) and e.coup_id != t.state.round:
        return f"the end of round {e.coup_id}, not the round being dealt"
    elif isinstance(e, dealing_shoe.RoundStarted) and t.state.round is not None:
        return f"round {e.coup_id} started while round {t.state.round} is dealt"
    return None


def carries_steps(m: Stored) -> bool:
    """Whether a coup's message carries any of the shoe's steps."""
    return not m.unreadable and any(isinstance(env.data, CARRIED) for env in m.batch.events)
