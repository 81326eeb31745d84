"""The payouts of a coup, from its recorded events: the settlement service
pays by this, and verification recomputes by it."""

from __future__ import annotations

from casino import games, rulesets
from casino.rules import settlement
from casino.rules import wagerbook as wager_book
from casino.rules.errors import RuleViolation
from casino.rules.ruleset import Ruleset
from casino.store.envelope import AnyEvent, CoupConfigured


def payouts_of(events: list[AnyEvent], book: wager_book.Book | None = None,
               rules: Ruleset | None = None) -> tuple[settlement.Payout, ...]:
    """The payouts of a coup from its recorded events: ruleset (loaded by the
    name its coup names unless the caller has it), book (folded from them
    unless the caller has) and result.

    The stakes the coup played with must be the stakes the wager book holds;
    otherwise the coup is not settled and the difference is reported.
    """
    configured = next(e for e in events if isinstance(e, CoupConfigured))
    rules = rulesets.load(configured.ruleset) if rules is None else rules
    book = wager_book.book_of(events) if book is None else book
    result = next(e for e in events if isinstance(e, games.RESULTS))
    game = games.of(rules)
    if not isinstance(result, game.result_type):
        raise RuleViolation("settlement", f"the coup's result is not a {game.name} result")
    return game.payouts(rules, book, result)
