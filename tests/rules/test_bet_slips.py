"""A bet slip (``wagerbook.PlaceWagers``): several wagers placed at once, as
an electronic table confirms a player's slip. Each is decided as a single
wager on the book the slip's earlier wagers leave, so a slip records the
same events as its wagers placed one by one; one wager refused refuses the
whole slip, its line and its rule named."""

from __future__ import annotations

import pytest

from casino.rules import wagerbook
from casino.rules.errors import RuleViolation
from casino.rules.wagers import Wager
from tests.rules.stacking import baccarat, blackjack

R = baccarat()
BJ = blackjack()


def opened(seated: tuple[tuple[int, str], ...] = ()) -> wagerbook.Book:
    return wagerbook.evolve(wagerbook.Book(), wagerbook.BookOpened("c", "r", seated))


def one_by_one(rules: object, book: wagerbook.Book,
               wagers: tuple[wagerbook.PlaceWager, ...]) -> list[wagerbook.AnyBookEvent]:
    events: list[wagerbook.AnyBookEvent] = []
    for w in wagers:
        placed = wagerbook.decide(rules, book, w)  # type: ignore[arg-type]
        for e in placed:
            book = wagerbook.evolve(book, e)
        events += placed
    return events


def refused(rules: object, book: wagerbook.Book, command: wagerbook.AnyBookCommand) -> RuleViolation:
    with pytest.raises(RuleViolation) as err:
        wagerbook.decide(rules, book, command)  # type: ignore[arg-type]
    return err.value


def minimum(rules: object, bet: str) -> int:
    return int(rules.limits[bet].min)  # type: ignore[attr-defined]


def test_a_slip_records_the_same_events_as_its_wagers_placed_one_by_one() -> None:
    book = opened(((1, "ANN"), (5, "BOB")))
    slip = (wagerbook.PlaceWager(1, "banker", minimum(R, "banker")),
            wagerbook.PlaceWager(1, "tie", minimum(R, "tie")),
            wagerbook.PlaceWager(5, "player", 5 * minimum(R, "player")),
            wagerbook.PlaceWager(5, "banker", minimum(R, "banker"), "CAL"))  # a back bet on BOB's box
    events = wagerbook.decide(R, book, wagerbook.PlaceWagers(slip))
    assert events == one_by_one(R, book, slip)
    after = book
    for e in events:
        after = wagerbook.evolve(after, e)
    assert after.wagers == (Wager(1, "banker", minimum(R, "banker"), "ANN"), Wager(1, "tie", minimum(R, "tie"), "ANN"),
                            Wager(5, "player", 5 * minimum(R, "player"), "BOB"),
                            Wager(5, "banker", minimum(R, "banker"), "CAL", True))


def test_one_wager_over_its_limit_refuses_the_whole_slip_naming_its_line_and_rule() -> None:
    book = opened(((1, "ANN"),))
    over = wagerbook.PlaceWager(1, "tie", R.limits["tie"].max + 1)
    single = refused(R, book, over)
    slip = wagerbook.PlaceWagers((wagerbook.PlaceWager(1, "banker", minimum(R, "banker")), over))
    whole = refused(R, book, slip)
    assert whole.clause == single.clause
    assert whole.reason.startswith("line 2 of the slip (seat 1 tie): ") and single.reason in whole.reason
    assert whole.reason.endswith("no wager on the slip is placed")


def test_a_slip_with_one_seats_bet_twice_is_refused_as_the_second_placed_alone_would_be() -> None:
    book = opened(((2, "ANN"),))
    twice = wagerbook.PlaceWagers((wagerbook.PlaceWager(2, "banker", minimum(R, "banker")),
                                   wagerbook.PlaceWager(2, "banker", 2 * minimum(R, "banker"))))
    err = refused(R, book, twice)
    assert (err.clause, err.reason.split(": ")[0]) == ("wager book", "line 2 of the slip (seat 2 banker)")
    assert "already has a banker wager" in err.reason


@pytest.mark.parametrize(("book", "says"), [
    (wagerbook.Book(), "betting has not opened"),
    (wagerbook.evolve(opened(), wagerbook.BookClosed(())), "betting is closed"),
])
def test_a_slip_outside_the_betting_window_is_refused(book: wagerbook.Book, says: str) -> None:
    err = refused(BJ, book, wagerbook.PlaceWagers((wagerbook.PlaceWager(1, "box", minimum(BJ, "box")),)))
    assert err.clause == "wager book" and says in err.reason


def test_an_empty_slip_is_refused() -> None:
    err = refused(BJ, opened(), wagerbook.PlaceWagers(()))
    assert err.clause == "wager book" and "at least one wager" in err.reason


def test_a_back_bet_on_a_blackjack_slip_is_refused_as_it_is_alone() -> None:
    book = opened(((3, "ANN"),))
    slip = wagerbook.PlaceWagers((wagerbook.PlaceWager(3, "box", minimum(BJ, "box")),
                                  wagerbook.PlaceWager(3, "box", minimum(BJ, "box"), "BOB")))
    err = refused(BJ, book, slip)
    assert err.clause == "seating" and "back bets are taken at baccarat only" in err.reason
