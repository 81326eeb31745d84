"""The dispute page's reading of a coup (``Site.coup_page``): what each card
shows at a step of its step-through, what the page says as of that step,
and which steps are its incidents."""

from __future__ import annotations

import re
from typing import NamedTuple

from casino.audit.replay import Card, CoupReplay, Step
from casino.cli.console import FACE_DOWN
from casino.rules.incidents import voided

# The steps a coup's page marks as incidents: a card out of turn or refused, a card keyed in, a ruling, a hold.
INCIDENTS = frozenset({"coup.card_incident", "coup.card_keyed", "coup.ruled", "coup.held", "shoe.card_refused",
                       "shoe.card_misdrawn", "shoe.cut_card_misplaced"})


def unnamed(text: str, card: str) -> str:
    """``text`` with ``card`` named in it as a whole word (``TC``, never the
    ``TC`` of ``UTC``) put as a face-down card; a card read as nothing names nothing."""
    return re.sub(rf"(?<!\w){re.escape(card)}(?!\w)", UNSEEN, text) if card else text


def faces(r: CoupReplay, step: int) -> list[str]:
    """Each card of the coup as its page shows it after ``step`` steps: face
    up once dealt face up or turned by then (a hole card until the record
    turns it, 002 (6)), else face down (``??``), dealt or not."""
    dealt = sum(1 for s in r.steps[:step] if s.type.endswith(".card_dealt"))
    turned = {s.data.position for s in r.steps[:step] if s.type == "blackjack.hole_card_turned"}
    return [c.card if i < dealt and (c.face_up or c.position in turned) else FACE_DOWN for i, c in enumerate(r.cards)]


# What a step names of a card that was face down as of the step shown.
UNSEEN = "a face-down card"


class AsOf(NamedTuple):
    """A coup as it stood after its first ``step`` steps: only what was known then."""

    steps: list[tuple[Step, str]]  # each step taken by then, with its text as it could be read then
    cards: list[tuple[Card, str]]  # each card dealt by then, with the face it showed
    closed: bool  # the betting closed by then: its wagers are the book's
    settled: bool  # settled by then: the payouts and the house's result are known
    void: Step | None  # the supervisor's ruling that made it void, if given by then


def as_of(r: CoupReplay, step: int) -> AsOf:
    """The coup after ``step`` steps: its steps so far, a card face down then
    named in none of them (a hole card drawn, 002 (6)), the cards dealt so
    far, and the wagers, the payouts and a void only once recorded."""
    taken = r.steps[:step]
    shown = faces(r, step)
    dealt = sum(1 for s in taken if s.type.endswith(".card_dealt"))
    unseen = {c.position: c.card for c, face in zip(r.cards, shown, strict=True) if face == FACE_DOWN}
    steps = []
    for s in taken:
        position = getattr(s.data, "position", None)
        steps.append((s, unnamed(s.text, unseen[position]) if position in unseen else s.text))
    return AsOf(steps, list(zip(r.cards[:dealt], shown[:dealt], strict=True)),
                any(s.type == "wager.book_closed" for s in taken), any(s.type == "settlement.coup_settled" for s in taken),
                next((s for s in taken if voided(s.data)), None))
