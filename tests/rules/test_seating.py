"""Seating: who sits where is recorded in each coup's wager book (a player
sits, leaves), carried from coup to coup, and the clauses that turn on seated
players apply to it: back bets (a standing player wagering on a seated
player's box) are paid, and never offered the cards, a role or the shoe
(000 8.5, 8.15, 8.25; 001 8.9 "the seated player")."""

from __future__ import annotations

import pytest

from casino.rules import wagerbook
from casino.rules.baccarat import coup as bac
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.blackjack import coup as bj
from casino.rules.blackjack import messages as blackjack_messages
from casino.rules.errors import RuleViolation
from casino.rules.settlement import settle_baccarat
from casino.rules.wagers import Wager
from tests.rules.stacking import baccarat, blackjack, of, play_bac

R = baccarat()
NATURAL = ["2S", "3H", "4D", "5C"]  # Player 6, Banker 8


def book(*commands: wagerbook.AnyBookCommand, rules: object = R, seated: tuple[tuple[int, str], ...] = ()) -> wagerbook.Book:
    b = wagerbook.evolve(wagerbook.Book(), wagerbook.BookOpened("c", "r", seated))
    for cmd in commands:
        for e in wagerbook.decide(rules, b, cmd):  # type: ignore[arg-type]
            b = wagerbook.evolve(b, e)
    return b


def refused(b: wagerbook.Book, cmd: wagerbook.AnyBookCommand, rules: object = R) -> RuleViolation:
    with pytest.raises(RuleViolation) as err:
        wagerbook.decide(rules, b, cmd)  # type: ignore[arg-type]
    return err.value


def test_players_sit_and_leave_while_betting_is_open_and_the_seating_is_carried_to_the_next_book() -> None:
    b = book(wagerbook.Sit(2, "ANN"), wagerbook.Sit(5, "BOB"), wagerbook.Leave(2))
    assert b.seated == ((5, "BOB"),)
    assert refused(b, wagerbook.Sit(5, "CAT")).clause == "seating"  # seat taken
    assert refused(b, wagerbook.Sit(3, "BOB")).clause == "seating"  # seated already
    assert refused(b, wagerbook.Leave(3)).clause == "seating"  # nobody there
    assert refused(b, wagerbook.Sit(3, "")).clause == "seating"
    assert refused(b, wagerbook.Sit(4, "CAT")).clause == "ruleset seats"  # 000 has no seat 4
    closed = wagerbook.evolve(b, wagerbook.decide(R, b, wagerbook.CloseBook())[0])
    assert refused(closed, wagerbook.Sit(3, "CAT")).clause == "wager book"  # betting is closed
    assert wagerbook.evolve(wagerbook.Book(), wagerbook.decide(R, wagerbook.Book(), wagerbook.OpenBook("c2", "r", closed.seated))[0]).seated == ((5, "BOB"),)


def test_a_seated_players_wager_is_theirs_and_a_back_bet_is_on_a_seated_players_box() -> None:
    b = book(wagerbook.Sit(5, "BOB"), wagerbook.PlaceWager(5, "banker", 5000), wagerbook.PlaceWager(5, "banker", 2500, "DAN"))
    assert [(w.seat, w.bet, w.amount, w.player, w.back) for w in b.wagers] == [
        (5, "banker", 5000, "BOB", False), (5, "banker", 2500, "DAN", True)]
    assert refused(b, wagerbook.PlaceWager(3, "player", 2500, "DAN")).clause == "seating"  # nobody seated at seat 3
    assert refused(b, wagerbook.Leave(5)).clause == "seating"  # wagers on the box
    assert refused(b, wagerbook.Sit(3, "DAN")).clause == "seating"  # back bets first cancelled
    after = book(wagerbook.Sit(5, "BOB"), wagerbook.PlaceWager(5, "banker", 2500, "DAN"), wagerbook.CancelWager(5, "banker", "DAN"))
    assert after.wagers == ()
    bj = blackjack()
    assert refused(book(wagerbook.Sit(1, "BOB"), rules=bj), wagerbook.PlaceWager(1, "box", 1000, "DAN"), bj).clause == "seating"


@pytest.mark.parametrize("rules", [R, blackjack()], ids=["baccarat", "blackjack"])
def test_nobody_sits_at_a_seat_holding_the_wagers_of_a_player_not_recorded_there(rules: object) -> None:
    """An unnamed wager at a seat nobody is recorded at is its own player's
    (a terminal that records no seating); another player sitting there would
    put two players' wagers on one box, and a blackjack box is dealt one hand."""
    bet, amount = ("box", 1000) if rules is not R else ("banker", 5000)
    placed = book(wagerbook.PlaceWager(1, bet, amount), rules=rules)
    assert [(w.seat, w.player) for w in placed.wagers] == [(1, "")]
    assert "cancelled before another sits there" in refused(placed, wagerbook.Sit(1, "BOB"), rules).reason
    cancelled = book(wagerbook.PlaceWager(1, bet, amount), wagerbook.CancelWager(1, bet), wagerbook.Sit(1, "BOB"),
                     wagerbook.PlaceWager(1, bet, amount), rules=rules)
    assert [(w.seat, w.player) for w in cancelled.wagers] == [(1, "BOB")]


@pytest.mark.parametrize("name", ["blackjack-002-hole-card", "blackjack-003-no-hole-card"])
def test_002_4_a_003_7_3_a_a_box_is_dealt_one_hand_two_wagers_on_it_are_refused(name: str) -> None:
    rules = blackjack(name)
    opened = bj.fold(bj.decide(rules, bj.BlackjackCoup(), blackjack_messages.OpenCoup("c")))
    two = (Wager(1, "box", 1000, ""), Wager(1, "box", 2000, "BOB"))
    refusal = bj.check(rules, opened, blackjack_messages.CloseBetting(two))
    assert refusal is not None and refusal.clause in ("002 (4)(a)", "003 7.3(a)")
    assert "one hand" in refusal.reason


def test_back_bets_are_paid_and_offered_nothing() -> None:
    b = book(wagerbook.Sit(5, "BOB"), wagerbook.Sit(2, "ANN"), wagerbook.PlaceWager(5, "banker", 5000),
             wagerbook.PlaceWager(2, "banker", 2500), wagerbook.PlaceWager(2, "banker", 100000, "DAN"))
    for procedure in ("method_c", "method_d"):
        rec = play_bac(R, NATURAL, procedure, b.wagers)
        orders = [o.seats for o in of(rec.events, baccarat_messages.OfferOrder)]
        assert orders == ([(2, 5)] if procedure == "method_c" else [(5, 2)]), (procedure, orders)
    rec = play_bac(R, NATURAL, "method_b", b.wagers, approvals=(baccarat_messages.Approval("method_b", "inspector"),))
    assert [o.seats for o in of(rec.events, baccarat_messages.OfferOrder) if o.offer == "banker"] == [(5, 2)]  # DAN's 100,000 not
    result = of(rec.events, baccarat_messages.CoupResulted)[0]
    paid = {(p.seat, p.player): p.returned for p in settle_baccarat(R, b.wagers, result)}
    assert paid[(2, "DAN")] == 100000 + 95000 and paid[(5, "BOB")] == 5000 + 4750


def test_000_8_18_the_holders_own_wager_is_his_not_a_back_bet_on_his_box() -> None:
    b = book(wagerbook.Sit(2, "ANN"), wagerbook.PlaceWager(2, "banker", 5000), wagerbook.PlaceWager(2, "player", 2500, "DAN"))
    rec = play_bac(R, NATURAL, "method_c", b.wagers)  # Banker wins: ANN's own wager won, DAN's back bet lost
    assert bac.shoe_holder_after(rec.coup) == 2
