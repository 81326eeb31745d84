"""Payouts in integer minor units, and the table ledger aggregate.

Every wager ends with ``returned`` (what goes back to the player, stake
included): 0 for a loss, the stake for a push, stake plus winnings for a win.
The house's net for a coup is what was staked minus what was returned, so every
unit of money is accounted for.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from casino.rules.baccarat.messages import CoupResulted as BaccaratResult
from casino.rules.blackjack.messages import CoupResulted as BlackjackResult
from casino.rules.errors import RuleViolation
from casino.rules.ruleset import BaccaratRules, BlackjackRules, Rounding
from casino.rules.wagers import Wager


class Payout(msgspec.Struct, frozen=True, gc=False):
    """How one wager was settled. ``hand`` is the blackjack hand index (0 otherwise)."""

    seat: int
    bet: str
    stake: int
    returned: int
    hand: int = 0
    commission: int = 0
    player: str = ""  # who placed the wager, where the table records it (a back bet's player)

    @property
    def net(self) -> int:
        """The player's gain (negative for a loss)."""
        return self.returned - self.stake


def divide(numerator: int, denominator: int, rounding: Rounding) -> int:
    """``numerator / denominator`` rounded to a whole minor unit as the ruleset says."""
    q, rem = divmod(numerator, denominator)
    if rem == 0 or rounding == "down":
        return q
    if rounding == "up":
        return q + 1
    return q + 1 if 2 * rem >= denominator else q


def settle_baccarat(rules: BaccaratRules, wagers: Iterable[Wager], result: BaccaratResult) -> tuple[Payout, ...]:
    """Pay every baccarat wager: Player 1:1, Banker 1:1 less commission, Tie
    ``tie_pays``:1 (Player and Banker push on a tie), pairs ``pair_pays``:1."""
    out = []
    for w in wagers:
        returned, commission = 0, 0
        if w.bet in ("player", "banker"):
            if result.winner == "tie":
                returned = w.amount
            elif result.winner == w.bet:
                win = w.amount
                if w.bet == "banker":
                    win = divide(w.amount * (10000 - rules.commission_bp), 10000, rules.commission_rounding)
                    commission = w.amount - win
                returned = w.amount + win
        elif w.bet == "tie":
            returned = w.amount * (1 + rules.tie_pays) if result.winner == "tie" else 0
        elif w.bet in ("player_pair", "banker_pair"):
            hit = result.player_pair if w.bet == "player_pair" else result.banker_pair
            returned = w.amount * (1 + rules.pair_pays) if hit else 0
        else:
            raise RuleViolation("ruleset limits", f"bet {w.bet!r} is not a baccarat bet")
        out.append(Payout(w.seat, w.bet, w.amount, returned, commission=commission, player=w.player))
    return tuple(out)


def settle_blackjack(rules: BlackjackRules, result: BlackjackResult) -> tuple[Payout, ...]:
    """Pay every blackjack hand and insurance: blackjack ``blackjack_pays``, a win
    1:1, a push returns the stake, insurance 2:1 against a dealer blackjack. With no
    peek a dealer blackjack takes all, or only the original bets (a setting)."""
    num, den = rules.blackjack_pays
    out = []
    for h in result.hands:
        if h.outcome == "blackjack":
            returned = h.stake + divide(h.stake * num, den, rules.payout_rounding)
        elif h.outcome == "win":
            returned = 2 * h.stake
        elif h.outcome == "push":
            returned = h.stake
        elif result.dealer_blackjack and rules.dealer_blackjack_takes == "original_bets":
            returned = h.stake - h.original
        else:
            returned = 0
        out.append(Payout(h.seat, "box", h.stake, returned, hand=h.hand))
    for seat, amount in result.insurance:
        out.append(Payout(seat, "insurance", amount, 3 * amount if result.dealer_blackjack else 0))
    return tuple(out)


# ---- the table ledger -----------------------------------------------------


class SettleCoup(msgspec.Struct, frozen=True, gc=False, tag_field="type", tag="settlement.settle_coup"):
    coup_id: str
    payouts: tuple[Payout, ...]


class CoupSettled(msgspec.Struct, frozen=True, gc=False, tag_field="type", tag="settlement.coup_settled"):
    coup_id: str
    payouts: tuple[Payout, ...]
    staked: int
    returned: int


class Ledger(msgspec.Struct, frozen=True, gc=False):
    """A table's running totals: what was staked, returned, and the house's net."""

    settled: frozenset[str] = frozenset()
    staked: int = 0
    returned: int = 0

    @property
    def house_net(self) -> int:
        return self.staked - self.returned


def decide_settlement(ledger: Ledger, command: SettleCoup) -> list[CoupSettled]:
    """Record a coup's payouts once; a second settlement of the same coup is refused."""
    if command.coup_id in ledger.settled:
        raise RuleViolation("settlement", f"coup {command.coup_id} is already settled")
    for p in command.payouts:
        if p.stake <= 0 or p.returned < 0:
            raise RuleViolation("settlement", "stakes are positive and returns are not negative")
    staked = sum(p.stake for p in command.payouts)
    returned = sum(p.returned for p in command.payouts)
    return [CoupSettled(command.coup_id, command.payouts, staked, returned)]


def evolve_ledger(ledger: Ledger, event: CoupSettled) -> Ledger:
    """The ledger after a coup is settled."""
    return Ledger(ledger.settled | {event.coup_id}, ledger.staked + event.staked, ledger.returned + event.returned)


