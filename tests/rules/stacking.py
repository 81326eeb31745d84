"""Stacked shoes and scripted players for golden coups."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import msgspec

from casino.config import rulesets
from casino.rules import play
from casino.rules.baccarat import coup as bac
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.blackjack import coup as bj
from casino.rules.blackjack import messages as blackjack_messages
from casino.rules.cards import Card, full_set
from casino.rules.ruleset import BaccaratRules, BlackjackRules, ShoeRules
from casino.rules.wagers import Wager

SALT = "stacked"


def baccarat(name: str = "baccarat-000-methods", **changes: object) -> BaccaratRules:
    rules = rulesets.load(name)
    assert isinstance(rules, BaccaratRules)
    return msgspec.structs.replace(rules, **changes)


def blackjack(name: str = "blackjack-002-hole-card", **changes: object) -> BlackjackRules:
    rules = rulesets.load(name)
    assert isinstance(rules, BlackjackRules)
    return msgspec.structs.replace(rules, **changes)


def shoe_rules(rules: BaccaratRules | BlackjackRules, **changes: object) -> ShoeRules:
    return msgspec.structs.replace(rules.shoe, **changes)


def burn_cards(rules: ShoeRules) -> list[Card]:
    """The burn the stacked order starts with: a king, or a two and two more cards."""
    if rules.burn == "none":
        return []
    if rules.burn == "first_card":
        return ["KC"]
    return ["2C", "QC", "JC"]


def order(decks: int, cards: Sequence[Card], burn: Sequence[Card] = ()) -> tuple[Card, ...]:
    """A full shoe whose first cards are ``burn`` then ``cards``; the rest in deck order."""
    head = list(burn) + list(cards)
    rest = Counter(full_set(decks))
    rest.subtract(head)
    assert all(n >= 0 for n in rest.values()), "stacked more copies of a card than the shoe holds"
    tail = []
    for c in full_set(decks):
        if rest[c] > 0:
            rest[c] -= 1
            tail.append(c)
    return tuple(head) + tuple(tail)


def stacked_shoe(rules: ShoeRules, *stacks: Sequence[Card], document: str = "") -> play.Shoe:
    """A shoe that will be filled with each stacked order in turn; ``document``
    is the ruleset's (the clauses the shoe cites)."""
    orders = [(order(rules.decks, s, burn_cards(rules)), SALT) for s in stacks]
    return play.Shoe(rules, orders, document=document)


@dataclass
class Scripted:
    """Players who answer as scripted: ``answers[(offer, seat)]`` is True, False or
    "player" (accept the shoe and play Player's Hand); unscripted offers are
    accepted. ``returns`` lists seats that give the cards back unexposed.
    ``decisions[(seat, hand)]`` lists blackjack actions in turn (default stand)."""

    answers: dict[tuple[str, int], bool | str] = field(default_factory=dict)
    returns: set[int] = field(default_factory=set)
    decisions: dict[tuple[int, int], list[str]] = field(default_factory=dict)
    insurance: dict[int, int] = field(default_factory=dict)

    def answer(self, coup: bac.BaccaratCoup, waiting: bac.Awaiting) -> baccarat_messages.AnswerOffer:
        assert waiting.seat is not None and waiting.offer is not None
        a = self.answers.get((waiting.offer, waiting.seat), True)
        return baccarat_messages.AnswerOffer(waiting.seat, bool(a), "player" if a == "player" else "banker")

    def give_back(self, coup: bac.BaccaratCoup, waiting: bac.Awaiting) -> baccarat_messages.ExposeHand | baccarat_messages.ReturnCards:
        assert waiting.seat is not None and waiting.hand is not None
        if waiting.seat in self.returns:
            return baccarat_messages.ReturnCards(waiting.seat, waiting.hand)
        return baccarat_messages.ExposeHand(waiting.seat, waiting.hand)

    def decide(self, coup: bj.BlackjackCoup, waiting: bj.Awaiting) -> blackjack_messages.Decide:
        assert waiting.seat is not None
        if waiting.seat in self.insurance:
            return blackjack_messages.Decide(waiting.seat, waiting.hand, "insurance", self.insurance.pop(waiting.seat))
        queue = self.decisions.get((waiting.seat, waiting.hand), [])
        action = queue.pop(0) if queue else "stand"
        return blackjack_messages.Decide(waiting.seat, waiting.hand, action)  # type: ignore[arg-type]


def wagers(*spec: tuple[int, str, int]) -> tuple[Wager, ...]:
    return tuple(Wager(seat, bet, amount) for seat, bet, amount in spec)


def inspector(what: str = "method_b") -> baccarat_messages.Approval:
    return baccarat_messages.Approval(what, "inspector", "INS-1")


def supervisor(what: str) -> baccarat_messages.Approval:
    return baccarat_messages.Approval(what, "casino_supervisor", "SUP-1")


def play_bac(
    rules: BaccaratRules,
    cards: Sequence[Card],
    procedure: str,
    book: Iterable[Wager],
    players: Scripted | None = None,
    approvals: Sequence[baccarat_messages.Approval] = (),
    **opening: object,
) -> play.BaccaratCoupRecord:
    """Deal one coup of ``procedure`` from a shoe stacked with ``cards``."""
    shoe = stacked_shoe(rules.shoe, cards, document=rules.document)
    return play.play_baccarat(
        rules, shoe, baccarat_messages.OpenCoup("coup-1", procedure, tuple(approvals), **opening),  # type: ignore[arg-type]
        tuple(book), players or Scripted(),
    )


def of(events: Iterable[object], kind: type) -> list:  # type: ignore[type-arg]
    return [e for e in events if isinstance(e, kind)]



def play_bj(
    rules: BlackjackRules,
    cards: Sequence[Card],
    book: Iterable[Wager],
    players: Scripted | None = None,
) -> play.BlackjackCoupRecord:
    """Deal one blackjack coup from a shoe stacked with ``cards``."""
    shoe = stacked_shoe(rules.shoe, cards, document=rules.document)
    return play.play_blackjack(rules, shoe, "coup-1", tuple(book), players or Scripted())
