"""Rulesets as data: frozen, validated settings an operator can read and change.

A ruleset file (TOML, see ``casino/rulesets/``) is decoded into one of these
structs; a wrong type, an unknown field or an impossible value is refused with a
message naming the field. Where a seed is cut off or refers to text we do not
have, the behaviour is a named setting here, documented in ``docs/rulesets.md``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Literal

import msgspec

from casino.rules.table import Table

Rounding = Literal["down", "half_up", "up"]
Shuffler = Literal["shoe", "non_continuous_shuffler", "continuous_shuffler"]
Approver = Literal["inspector", "casino_supervisor"]
BaccaratProcedure = Literal[
    "method_a", "method_b", "method_c", "method_d", "style_a", "style_b", "style_c"
]
BaccaratBet = Literal["player", "banker", "tie", "player_pair", "banker_pair"]

BACCARAT_BETS: tuple[BaccaratBet, ...] = ("player", "banker", "tie", "player_pair", "banker_pair")


class RulesetError(ValueError):
    """A ruleset file that cannot be used; the message names the field."""


def _check_seats(seats: tuple[int, ...]) -> None:
    try:
        Table(seats)
    except ValueError as exc:
        raise ValueError(f"`seats`: {exc}") from None


@lru_cache(maxsize=64)
def _table(seats: tuple[int, ...]) -> Table:
    """A ruleset's table, made once per seat layout (the rules ask for it at every coup)."""
    return Table(seats)


def _require(ok: bool, field: str, why: str) -> None:
    if not ok:
        # msgspec adds where the offending table sits (`- at `$.shoe``).
        raise ValueError(f"`{field}` {why}")


class Limit(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Minimum and maximum stake of one kind of bet, in the table's minor unit."""

    min: int
    max: int

    def __post_init__(self) -> None:
        _require(0 < self.min <= self.max, "min", "must be positive and at most `max`")


class ShoeRules(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How the cards are held, cut and burned.

    ``cut_card_first_of_round``: 003 7.9 reshuffles at once when the cut card
    comes out as the first card of a new round (``"reshuffle_now"``); 002 (9) has
    no such clause, so under it the round is dealt and the reshuffle follows it
    (``"deal_round"``).
    ``burn``: 002 (3) burns the first card after each shuffle (``"first_card"``);
    baccarat houses commonly turn the first card and burn as many as its value
    (``"by_first_card_value"``, tens and pictures count ten).
    """

    decks: int
    penetration: float = 0.8
    burn: Literal["none", "first_card", "by_first_card_value"] = "first_card"
    shuffler: Shuffler = "shoe"
    cut_card_first_of_round: Literal["reshuffle_now", "deal_round"] = "reshuffle_now"
    # House rules where the regulations are silent, for a table with a card-reading shoe (docs/clauses.md):
    # what a supervisor's ruling makes of a coup held for a card out when none was due (``misdraw``: the
    # card burned and the coup dealt on, or the coup void), for a card the shoe cannot have given
    # (``refused``: not the next of the committed order, or one copy too many; ``end_shoe``: the coup void
    # and the shoe ended, its cards shuffled again), and for a cut card that comes out further than
    # ``cut_card_tolerance`` cards from where the penetration puts it, or does not come out by then
    # (``cut_card``: dealt on, the cut card reckoned where the penetration puts it; or the shoe ended).
    # ``end_shoe_after``: the shoe is ended, whatever the house rule, at the card refused that many times in a
    # row, and at the coup that would be the table's that many-th voided in a row, across shoes (a shoe out of
    # its order); the shoe after one a ruling ended must not be ended so too: the table is closed instead.
    # ``most_awaiting``: the incidents that may await a ruling at once; the card that would be one more closes
    # the table (casino.rules.incidents), until a supervisor reopens it.
    misdraw: Literal["go_on", "void"] = "go_on"
    refused: Literal["go_on", "void", "end_shoe"] = "void"
    cut_card: Literal["go_on", "end_shoe"] = "go_on"
    cut_card_tolerance: int = 8
    end_shoe_after: int = 3
    most_awaiting: int = 10

    def __post_init__(self) -> None:
        _require(1 <= self.decks <= 8, "decks", "must be 1 to 8")
        _require(0.1 <= self.penetration <= 0.95, "penetration", "must be 0.1 to 0.95")
        _require(0 <= self.cut_card_tolerance <= 52, "cut_card_tolerance", "must be 0 to 52 cards")
        _require(1 <= self.end_shoe_after <= 3, "end_shoe_after", "must be 1 to 3 (no table voids more than 3 "
                                                                  "coups in a row, a shoe out of its order)")
        _require(1 <= self.most_awaiting <= 100, "most_awaiting", "must be 1 to 100 incidents awaiting a ruling")

    @property
    def cards(self) -> int:
        return 52 * self.decks

    @property
    def cut_index(self) -> int | None:
        """Position of the first card behind the cut card (None: no cut card)."""
        return None if self.shuffler == "continuous_shuffler" else round(self.cards * self.penetration)


class BaccaratRules(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="game", tag="baccarat"):
    """A baccarat ruleset (documents 000 and 001).

    ``procedures`` are the dealing methods or styles this table may use;
    ``approvals`` says which procedure or option needs whose prior approval
    (000 8.4 Method B: an inspector; 000 8.17.2 / 8.27.2 a shoe holder playing
    Player's Hand: a casino supervisor; 001 8.5 a change of style on a continuous
    shuffler: approved procedure).
    ``fallback_method``: 000 8.16 / 8.26 deal by Method A or B when all decline
    the shoe.
    ``unfilled_role``: 001 8.9(d) refers to rule 8.18, not in our copy; the
    default ``"dealer_retains"`` follows 000 8.10 and Style A (the dealer keeps
    and exposes the cards).
    ``style_c``: 001 8.5 names Style C but its text is cut off; by default it is
    ``"refused"``; an operator whose Style C is one of the others may map it.
    ``holder_loses_shoe``: 000 8.18 "the player's wager loses". By default
    (``"own_wager"``) the holder's own wagers decide: the shoe is lost when any
    of them loses. Banker and Player wagers push on a tie, so a holder with
    wagers on both hands loses the shoe unless the coup is a tie, and one with
    only a Tie (or a pair) wager loses it unless that wager wins.
    ``"hand_played"`` reads it as the hand the holder plays losing.
    """

    name: str
    document: str
    shoe: ShoeRules
    seats: tuple[int, ...]
    procedures: tuple[BaccaratProcedure, ...]
    limits: dict[BaccaratBet, Limit]
    approvals: dict[str, Approver] = {}
    fallback_method: Literal["method_a", "method_b"] = "method_a"
    unfilled_role: Literal["dealer_retains"] = "dealer_retains"
    style_c: Literal["refused", "as_style_a", "as_style_b"] = "refused"
    holder_loses_shoe: Literal["own_wager", "hand_played"] = "own_wager"
    commission_bp: int = 500
    commission_rounding: Rounding = "down"
    tie_pays: int = 8
    pair_pays: int = 11

    def __post_init__(self) -> None:
        _check_seats(self.seats)
        _require(bool(self.procedures), "procedures", "must name at least one procedure")
        uses_methods = any(p.startswith("method") for p in self.procedures)
        uses_styles = any(p.startswith("style") for p in self.procedures)
        _require(not (uses_methods and uses_styles), "procedures", "may not mix methods (000) and styles (001)")
        _require(0 <= self.commission_bp < 10000, "commission_bp", "must be 0 to 9999 basis points")
        _require(self.tie_pays in (8, 9), "tie_pays", "must be 8 or 9 (to 1)")
        _require(self.pair_pays > 0, "pair_pays", "must be positive")
        _require({"player", "banker"} <= set(self.limits), "limits", "must include player and banker")
        for key in self.approvals:
            _require(key in APPROVABLE, "approvals", f"has an unknown entry {key!r}")
        # A coup takes at most three cards a hand, six in all, and the cut card
        # may come out at its first card (deal_round: the coup is dealt to its
        # end from the cards behind it) or at its second (reshuffle_now).
        if self.shoe.cut_index is not None:
            behind = self.shoe.cards - self.shoe.cut_index
            most = 6 if self.shoe.cut_card_first_of_round == "deal_round" else 5
            _require(behind >= most, "penetration", f"leaves {behind} cards behind the cut card of a "
                                                    f"{self.shoe.decks}-deck shoe; a coup begun at it may need {most}")

    @property
    def table(self) -> Table:
        return _table(self.seats)

    @property
    def offered_bets(self) -> tuple[BaccaratBet, ...]:
        return tuple(b for b in BACCARAT_BETS if b in self.limits)


APPROVABLE = ("method_b", "holder_plays_player", "style_change", "style_b")


class BlackjackRules(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="game", tag="blackjack"):
    """A blackjack ruleset (documents 002 and 003).

    ``hole_card``: 002 (4)(d) deals the dealer a second card face down that the
    dealer may not look at until all players have acted; 003 7.6 deals it only
    after the players have acted.
    ``dealer_hits_soft_17``: the dealer's drawing rule; 002 (7) refers to
    "regulation 23(2)", which we do not have, so this is the setting for it.
    ``dealer_blackjack_takes``: with no peek, what a player loses to a dealer
    blackjack: ``"all"`` or only the ``"original_bets"`` (doubles and splits
    returned).
    ``pickup``: 002 (8) dealer's cards first; 003 7.7 players' cards first.
    """

    name: str
    document: str
    shoe: ShoeRules
    seats: tuple[int, ...]
    limits: dict[Literal["box"], Limit]
    hole_card: bool
    pickup: Literal["dealer_first", "players_first"]
    dealer_hits_soft_17: bool = False
    dealer_blackjack_takes: Literal["all", "original_bets"] = "all"
    blackjack_pays: tuple[int, int] = (3, 2)
    payout_rounding: Rounding = "down"
    insurance: bool = True
    double_on: Literal["any_two", "9_10_11", "10_11"] = "any_two"
    double_after_split: bool = True
    max_hands: int = 4
    resplit_aces: bool = False
    split_by_value: bool = False

    def __post_init__(self) -> None:
        _check_seats(self.seats)
        _require(self.document != "003" or self.shoe.cut_card_first_of_round == "reshuffle_now",
                 "cut_card_first_of_round", "must be `reshuffle_now` under 003 (7.9: the cards are reshuffled at once)")
        _require(self.blackjack_pays[0] > 0 and self.blackjack_pays[1] > 0, "blackjack_pays", "must be positive")
        _require(1 <= self.max_hands <= 8, "max_hands", "must be 1 to 8")

    @property
    def table(self) -> Table:
        return _table(self.seats)


Ruleset = BaccaratRules | BlackjackRules


def parse_ruleset(data: Any) -> Ruleset:
    """Validate decoded ruleset data (a mapping, e.g. from TOML).

    Raises ``RulesetError`` whose message names the offending field.
    """
    try:
        rules: Ruleset = msgspec.convert(data, BaccaratRules | BlackjackRules, strict=True)
    except msgspec.ValidationError as exc:
        raise RulesetError(str(exc)) from None
    return rules
