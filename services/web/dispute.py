"""The dispute page's reading of a coup (``Site.coup_page``): what each card
shows at a step of its step-through, and which steps are its incidents."""

from __future__ import annotations

from casino.audit.replay import CoupReplay
from casino.cli.console import FACE_DOWN

# The steps a coup's page marks as incidents: a card out of turn or refused, a card keyed in, a ruling, a hold.
INCIDENTS = frozenset({"coup.card_incident", "coup.card_keyed", "coup.ruled", "coup.held", "shoe.card_refused",
                       "shoe.card_misdrawn", "shoe.cut_card_misplaced"})


def faces(r: CoupReplay, step: int) -> list[str]:
    """Each card of the coup as its page shows it after ``step`` steps: face
    up once dealt face up or turned by then (a hole card until the record
    turns it, 002 (6)), else face down (``??``), dealt or not."""
    dealt = sum(1 for s in r.steps[:step] if s.type.endswith(".card_dealt"))
    turned = {s.data.position for s in r.steps[:step] if s.type == "blackjack.hole_card_turned"}
    return [c.card if i < dealt and (c.face_up or c.position in turned) else FACE_DOWN for i, c in enumerate(r.cards)]
