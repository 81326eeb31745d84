"""Commands to and events of a baccarat coup (msgspec, tagged, frozen)."""

from __future__ import annotations

from typing import Literal

import msgspec

from casino.rules.cards import Card
from casino.rules.wagers import Wager

Hand = Literal["player", "banker"]
Offer = Literal["shoe", "player", "banker"]
Approver = Literal["inspector", "casino_supervisor"]


class Approval(msgspec.Struct, frozen=True, gc=False):
    """A prior approval: what was approved, by whom, and their reference; the
    conditions the approver imposed (000 8.4: "subject to any conditions
    imposed by") and when it was granted, as the casino's configuration gives
    them, recorded with every coup dealt under it. As recorded, its text is
    read whatever it holds (shown escaped): the rule for what a terminal may
    write is the command's (``casino.protocol.commands``)."""

    what: str
    by: Approver
    reference: str = ""
    conditions: str = ""
    granted: str = ""


# ---- commands -------------------------------------------------------------


class BaccaratCommand(msgspec.Struct, frozen=True, gc=False, tag_field="type"):
    """A command to the coup of one baccarat table."""


class OpenCoup(BaccaratCommand, frozen=True, tag="baccarat.open_coup"):
    """Open a coup. ``shoe_style`` is the style in force on this shoe (001 8.5);
    ``shoe_holder`` the seat of the player who kept the shoe from the last
    coup (000 8.18), ``shoe_holder_player`` who that player is (the shoe goes
    with the player, not the seat; empty where the table records no one).
    ``in_force`` is the procedure the table deals by (empty: not checked, as
    when a recorded opening is decided again): another one is the casino's
    choice (000 8.2, 001 8.5), directed by ``supervisor``, never by a terminal."""

    coup_id: str
    procedure: str
    approvals: tuple[Approval, ...] = ()
    shoe_style: str | None = None
    shoe_holder: int | None = None
    shoe_holder_player: str = ""
    in_force: str = ""
    supervisor: str = ""


class CloseBetting(BaccaratCommand, frozen=True, tag="baccarat.close_betting"):
    wagers: tuple[Wager, ...]


class AnswerOffer(BaccaratCommand, frozen=True, tag="baccarat.answer_offer"):
    """A player's answer to the offer of the cards, a role or the shoe; a shoe
    holder may ask to play Player's Hand (000 8.17.2, 8.27.2)."""

    seat: int
    accept: bool
    plays: Hand = "banker"


class DealCard(BaccaratCommand, frozen=True, tag="baccarat.deal_card"):
    """A card leaves the shoe. ``by`` is the seat of a player holding the shoe,
    None for the dealer."""

    card: Card
    position: int
    by: int | None = None


class PassCards(BaccaratCommand, frozen=True, tag="baccarat.pass_cards"):
    hand: Hand


class ExposeHand(BaccaratCommand, frozen=True, tag="baccarat.expose_hand"):
    seat: int
    hand: Hand


class ReturnCards(BaccaratCommand, frozen=True, tag="baccarat.return_cards"):
    """The player gives the cards back to the dealer without exposing them."""

    seat: int
    hand: Hand


class ReportHandlingBreach(BaccaratCommand, frozen=True, tag="baccarat.report_handling_breach"):
    """The dealer or surveillance saw cards leave full view (000 8.12, 8.22, 8.31)."""

    seat: int
    hand: Hand
    note: str = ""


class PassShoe(BaccaratCommand, frozen=True, tag="baccarat.pass_shoe"):
    """The holder gives up the shoe (000 8.18)."""

    seat: int


class ForfeitShoe(BaccaratCommand, frozen=True, tag="baccarat.forfeit_shoe"):
    """A casino supervisor directs the holder to give up the shoe (000 8.20, 8.29)."""

    seat: int
    supervisor: str


# ---- events ---------------------------------------------------------------


class BaccaratEvent(msgspec.Struct, frozen=True, gc=False, tag_field="type"):
    """A fact about one baccarat coup."""


class CoupOpened(BaccaratEvent, frozen=True, tag="baccarat.coup_opened"):
    coup_id: str
    procedure: str
    approvals: tuple[Approval, ...]
    shoe_holder: int | None
    clause: str
    shoe_holder_player: str = ""  # who holds the shoe at ``shoe_holder`` (version 2; empty before)
    # Version 3 (empty before): the procedure the table dealt by until this coup
    # (000 8.2, 001 8.5), and who directed the opening, on their own credential.
    in_force: str = ""
    supervisor: str = ""


class BettingClosed(BaccaratEvent, frozen=True, tag="baccarat.betting_closed"):
    wagers: tuple[Wager, ...]


class OfferOrder(BaccaratEvent, frozen=True, tag="baccarat.offer_order"):
    """The order in which the cards, a role or the shoe will be offered."""

    offer: Offer
    seats: tuple[int, ...]
    clause: str


class OfferMade(BaccaratEvent, frozen=True, tag="baccarat.offer_made"):
    offer: Offer
    seat: int
    clause: str


class OfferAnswered(BaccaratEvent, frozen=True, tag="baccarat.offer_answered"):
    offer: Offer
    seat: int
    accepted: bool
    plays: Hand


class HolderAssigned(BaccaratEvent, frozen=True, tag="baccarat.holder_assigned"):
    """Who holds the shoe or a hand's cards; None: the dealer keeps them. The
    marker or puck goes in front of that seat (000 8.9, 8.21; 001 8.11(c))."""

    offer: Offer
    seat: int | None
    plays: Hand | None
    clause: str
    # Who accepted the shoe or the hand's cards at ``seat`` (the shoe: version 2, the cards: version 3; empty
    # before, and where the table records no one at the seat).
    player: str = ""

    def said(self) -> str:
        """Who holds what, in plain words ("" where the dealer keeps them)."""
        whom = f"seat {self.seat}" + (f" ({self.player})" if self.player else "")
        return "" if self.seat is None else f"{self.plays}'s cards: {whom}" if self.plays is not None \
            else f"the shoe: {whom}"


class ProcedureFellBack(BaccaratEvent, frozen=True, tag="baccarat.procedure_fell_back"):
    procedure: str
    clause: str


class CardDealt(BaccaratEvent, frozen=True, tag="baccarat.card_dealt"):
    hand: Hand
    card: Card
    position: int
    face_up: bool
    by: int | None
    clause: str = ""  # the procedure's dealing clause; empty in records from before it was cited (version 1)


class CardsPassed(BaccaratEvent, frozen=True, tag="baccarat.cards_passed"):
    hand: Hand
    seat: int
    clause: str


class HandExposed(BaccaratEvent, frozen=True, tag="baccarat.hand_exposed"):
    hand: Hand
    seat: int
    clause: str


class CardsReturned(BaccaratEvent, frozen=True, tag="baccarat.cards_returned"):
    hand: Hand
    seat: int
    clause: str = ""  # 000 8.14.1, 8.24.1, 8.33.1, 001 8.11(b); empty in records from before it was cited (version 1)


class HandlingBreachReported(BaccaratEvent, frozen=True, tag="baccarat.handling_breach_reported"):
    hand: Hand
    seat: int
    note: str
    clause: str


class CardsTurnedOver(BaccaratEvent, frozen=True, tag="baccarat.cards_turned_over"):
    hand: Hand
    positions: tuple[int, ...]
    clause: str


class CountAnnounced(BaccaratEvent, frozen=True, tag="baccarat.count_announced"):
    hand: Hand
    points: int
    clause: str


class CoupResulted(BaccaratEvent, frozen=True, tag="baccarat.coup_resulted"):
    winner: Literal["player", "banker", "tie"]
    player_points: int
    banker_points: int
    natural: bool
    player_pair: bool
    banker_pair: bool


class CardsPickedUp(BaccaratEvent, frozen=True, tag="baccarat.cards_picked_up"):
    cards: tuple[Card, ...]


class ShoeGivenUp(BaccaratEvent, frozen=True, tag="baccarat.shoe_given_up"):
    """The holder gives up the shoe: ``passed`` by choice (000 8.18), ``lost``
    (the holder's wager lost, 8.18), ``forfeited`` at the direction of
    ``supervisor`` (8.20, 8.29), ``no_wager`` (a holder with no wager in the
    coup, who could not be offered the shoe under 8.15), or ``left`` (the
    holder left the seat and another player wagers there: the shoe went with
    the player who accepted it, and is offered afresh under 8.15)."""

    seat: int
    reason: Literal["passed", "lost", "forfeited", "no_wager", "left"]
    clause: str
    supervisor: str = ""
    player: str = ""  # the player who held it (version 2; empty before, and where the table recorded no one)


AnyBaccaratCommand = (
    OpenCoup | CloseBetting | AnswerOffer | DealCard | PassCards | ExposeHand | ReturnCards
    | ReportHandlingBreach | PassShoe | ForfeitShoe
)
AnyBaccaratEvent = (
    CoupOpened | BettingClosed | OfferOrder | OfferMade | OfferAnswered | HolderAssigned | ProcedureFellBack
    | CardDealt | CardsPassed | HandExposed | CardsReturned | HandlingBreachReported | CardsTurnedOver
    | CountAnnounced | CoupResulted | CardsPickedUp | ShoeGivenUp
)
