"""Commands to and events of a blackjack coup (msgspec, tagged, frozen)."""

from __future__ import annotations

from typing import Literal

import msgspec

from casino.rules.cards import Card
from casino.rules.wagers import Wager

Action = Literal["stand", "hit", "double", "split", "insurance"]
Outcome = Literal["blackjack", "win", "push", "lose"]


class BlackjackCommand(msgspec.Struct, frozen=True, gc=False, tag_field="type"):
    """A command to the coup of one blackjack table."""


class OpenCoup(BlackjackCommand, frozen=True, tag="blackjack.open_coup"):
    coup_id: str


class CloseBetting(BlackjackCommand, frozen=True, tag="blackjack.close_betting"):
    wagers: tuple[Wager, ...]


class DealCard(BlackjackCommand, frozen=True, tag="blackjack.deal_card"):
    """A card leaves the shoe; ``by`` is None for the dealer (002 (2), (10))."""

    card: Card
    position: int
    by: int | None = None


class Decide(BlackjackCommand, frozen=True, tag="blackjack.decide"):
    """A player's decision for one hand of their box; ``amount`` for insurance."""

    seat: int
    hand: int
    action: Action
    amount: int = 0


class BlackjackEvent(msgspec.Struct, frozen=True, gc=False, tag_field="type"):
    """A fact about one blackjack coup."""


class CoupOpened(BlackjackEvent, frozen=True, tag="blackjack.coup_opened"):
    coup_id: str
    hole_card: bool
    clause: str


class BettingClosed(BlackjackEvent, frozen=True, tag="blackjack.betting_closed"):
    wagers: tuple[Wager, ...]


class CardDealt(BlackjackEvent, frozen=True, tag="blackjack.card_dealt"):
    """A card to a box's hand (``seat``, ``hand``) or to the dealer (seat None)."""

    seat: int | None
    hand: int
    card: Card
    position: int
    face_up: bool
    clause: str


class TotalAnnounced(BlackjackEvent, frozen=True, tag="blackjack.total_announced"):
    seat: int | None
    hand: int
    total: int
    soft: bool
    clause: str


class DecisionTaken(BlackjackEvent, frozen=True, tag="blackjack.decision_taken"):
    seat: int
    hand: int
    action: Action
    amount: int
    clause: str = ""  # 002 (5)/(6), 003 7.4/7.5; empty in records from before it was cited (version 1)


class HandCompleted(BlackjackEvent, frozen=True, tag="blackjack.hand_completed"):
    seat: int
    hand: int
    reason: Literal["stand", "bust", "twenty_one", "blackjack", "doubled", "split_aces"]


class HoleCardTurned(BlackjackEvent, frozen=True, tag="blackjack.hole_card_turned"):
    card: Card
    position: int
    clause: str


class HandResult(msgspec.Struct, frozen=True, gc=False):
    seat: int
    hand: int
    outcome: Outcome
    total: int
    stake: int
    original: int


class CoupResulted(BlackjackEvent, frozen=True, tag="blackjack.coup_resulted"):
    dealer_total: int
    dealer_blackjack: bool
    hands: tuple[HandResult, ...]
    insurance: tuple[tuple[int, int], ...]


class CardsPickedUp(BlackjackEvent, frozen=True, tag="blackjack.cards_picked_up"):
    cards: tuple[Card, ...]
    clause: str


AnyBlackjackCommand = OpenCoup | CloseBetting | DealCard | Decide
AnyBlackjackEvent = (
    CoupOpened | BettingClosed | CardDealt | TotalAnnounced | DecisionTaken | HandCompleted | HoleCardTurned
    | CoupResulted | CardsPickedUp
)
