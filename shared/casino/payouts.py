"""The payouts of a coup, from its recorded events: the settlement service
pays by this, and verification recomputes by it."""

from __future__ import annotations

from casino import rulesets
from casino.rules import settlement as pay
from casino.rules import wagerbook as W
from casino.rules.baccarat import messages as bm
from casino.rules.blackjack import messages as jm
from casino.rules.errors import RuleViolation
from casino.rules.ruleset import BaccaratRules, BlackjackRules, Ruleset
from casino.store.envelope import AnyEvent, CoupConfigured


def payouts_of(events: list[AnyEvent], book: W.Book | None = None, rules: Ruleset | None = None) -> tuple[pay.Payout, ...]:
    """The payouts of a coup from its recorded events: ruleset (loaded by the
    name its coup names unless the caller has it), book (folded from them
    unless the caller has) and result.

    The stakes the coup played with must be the stakes the wager book holds;
    otherwise the coup is not settled and the difference is reported.
    """
    configured = next(e for e in events if isinstance(e, CoupConfigured))
    rules = rulesets.load(configured.ruleset) if rules is None else rules
    book = W.book_of(events) if book is None else book
    result = next(e for e in events if isinstance(e, bm.CoupResulted | jm.CoupResulted))
    if isinstance(result, bm.CoupResulted):
        assert isinstance(rules, BaccaratRules)
        return pay.settle_baccarat(rules, book.wagers, result)
    assert isinstance(rules, BlackjackRules)
    payouts = pay.settle_blackjack(rules, result)
    for seat in {p.seat for p in payouts}:
        if sum(p.stake for p in payouts if p.seat == seat) != book.staked(seat):
            raise RuleViolation("settlement", f"seat {seat}'s stakes differ from the wager book")
    return payouts
