"""Standard blackjack rules the seeds take for granted: insurance, doubling,
splitting, the dealer's soft 17, blackjack payouts, a dealer blackjack with no peek."""

from __future__ import annotations

import msgspec
import pytest

from casino.rules.blackjack import coup as bj
from casino.rules.blackjack import hand as hand_totals
from casino.rules.blackjack import messages as blackjack_messages
from casino.rules.errors import RuleViolation
from casino.rules.ruleset import BlackjackRules
from tests.rules.stacking import Scripted, blackjack, of, play_bj, wagers
from tests.rules.test_blackjack_002_003 import dealt_to_play

R = blackjack("blackjack-002-hole-card")
SEAT2 = wagers((2, "box", 2000))


def returned(rec: object) -> list[tuple[str, int, int, int]]:
    return [(p.bet, p.hand, p.stake, p.returned) for p in rec.payouts]  # type: ignore[attr-defined]


def refusal(rules: BlackjackRules, s: bj.BlackjackCoup, cmd: blackjack_messages.AnyBlackjackCommand) -> str:
    with pytest.raises(RuleViolation) as err:
        bj.decide(rules, s, cmd)
    return err.value.clause


def test_insurance_against_an_ace_pays_two_to_one_on_a_dealer_blackjack() -> None:
    rec = play_bj(R, ["TS", "AH", "9S", "KD"], SEAT2, Scripted(insurance={2: 1000}))
    assert rec.coup.result is not None and rec.coup.result.dealer_blackjack
    assert returned(rec) == [("box", 0, 2000, 0), ("insurance", 0, 1000, 3000)]
    rec = play_bj(R, ["TS", "AH", "9S", "7D"], SEAT2, Scripted(insurance={2: 1000}))
    assert returned(rec) == [("box", 0, 2000, 4000), ("insurance", 0, 1000, 0)]


def test_insurance_only_against_an_ace_up_to_half_the_wager_and_before_acting() -> None:
    s = dealt_to_play(R, ["TS", "9H", "9S", "KD"], SEAT2)
    assert refusal(R, s, blackjack_messages.Decide(2, 0, "insurance", 500)) == "game rules: insurance"
    s = dealt_to_play(R, ["5S", "AH", "4S", "KD"], SEAT2)
    assert refusal(R, s, blackjack_messages.Decide(2, 0, "insurance", 1001)) == "game rules: insurance"
    assert refusal(R, s, blackjack_messages.Decide(2, 0, "insurance", 0)) == "game rules: insurance"
    s = bj.fold(bj.decide(R, s, blackjack_messages.Decide(2, 0, "hit")), s)
    s = bj.fold(bj.decide(R, s, blackjack_messages.DealCard("2C", 9)), s)
    assert refusal(R, s, blackjack_messages.Decide(2, 0, "insurance", 500)) == "game rules: insurance"
    no_insurance = msgspec.structs.replace(R, insurance=False)
    s = dealt_to_play(no_insurance, ["5S", "AH", "4S", "KD"], SEAT2)
    assert refusal(no_insurance, s, blackjack_messages.Decide(2, 0, "insurance", 500)) == "ruleset insurance"


def test_double_down_doubles_the_stake_for_exactly_one_more_card() -> None:
    rec = play_bj(R, ["5S", "9H", "6S", "7C", "TC", "8D"], SEAT2, Scripted(decisions={(2, 0): ["double"]}))
    assert [(e.action, e.amount) for e in of(rec.events, blackjack_messages.DecisionTaken)] == [("double", 2000)]
    assert [e.reason for e in of(rec.events, blackjack_messages.HandCompleted)] == ["doubled"]
    assert returned(rec) == [("box", 0, 4000, 8000)]


def test_double_only_on_the_totals_the_ruleset_allows() -> None:
    no_hole = blackjack("blackjack-003-no-hole-card")  # doubles on 9, 10, 11
    s = dealt_to_play(no_hole, ["TS", "9H", "2S"], SEAT2)
    assert refusal(no_hole, s, blackjack_messages.Decide(2, 0, "double")) == "ruleset double_on"
    s = dealt_to_play(R, ["TS", "9H", "2S", "KD"], SEAT2)
    s = bj.fold(bj.decide(R, s, blackjack_messages.Decide(2, 0, "hit")), s)
    s = bj.fold(bj.decide(R, s, blackjack_messages.DealCard("2C", 9)), s)
    assert refusal(R, s, blackjack_messages.Decide(2, 0, "double")) == "game rules: double"


def test_split_pairs_each_hand_played_in_turn_with_double_after_split() -> None:
    players = Scripted(decisions={(2, 0): ["split", "double"], (2, 1): ["stand"]})
    rec = play_bj(R, ["8S", "7H", "8D", "TC", "3C", "9H", "TD"], SEAT2, players)
    dealt = [(e.seat, e.hand, e.card) for e in of(rec.events, blackjack_messages.CardDealt) if e.seat == 2]
    assert dealt == [(2, 0, "8S"), (2, 0, "8D"), (2, 0, "3C"), (2, 0, "9H"), (2, 1, "TD")]
    box = rec.coup.boxes[0]
    assert [h.codes for h in box.hands] == [("8S", "3C", "9H"), ("8D", "TD")]
    assert returned(rec) == [("box", 0, 4000, 8000), ("box", 1, 2000, 4000)]


def test_only_a_pair_may_be_split_and_no_more_hands_than_the_ruleset_allows() -> None:
    s = dealt_to_play(R, ["8S", "7H", "9D", "TC"], SEAT2)
    assert refusal(R, s, blackjack_messages.Decide(2, 0, "split")) == "game rules: split"
    two = msgspec.structs.replace(R, max_hands=2)
    s = dealt_to_play(two, ["8S", "7H", "8D", "TC"], SEAT2)
    s = bj.fold(bj.decide(two, s, blackjack_messages.Decide(2, 0, "split")), s)
    s = bj.fold(bj.decide(two, s, blackjack_messages.DealCard("8C", 9)), s)
    assert refusal(two, s, blackjack_messages.Decide(2, 0, "split")) == "ruleset max_hands"
    no_das = msgspec.structs.replace(R, double_after_split=False)
    s = dealt_to_play(no_das, ["8S", "7H", "8D", "TC"], SEAT2)
    s = bj.fold(bj.decide(no_das, s, blackjack_messages.Decide(2, 0, "split")), s)
    s = bj.fold(bj.decide(no_das, s, blackjack_messages.DealCard("3C", 9)), s)
    assert refusal(no_das, s, blackjack_messages.Decide(2, 0, "double")) == "ruleset double_after_split"


def test_split_aces_take_one_card_each_and_twenty_one_is_not_blackjack() -> None:
    rec = play_bj(R, ["AS", "9H", "AD", "7C", "KC", "5C", "2C"], SEAT2, Scripted(decisions={(2, 0): ["split"]}))
    assert [e.reason for e in of(rec.events, blackjack_messages.HandCompleted)] == ["split_aces", "split_aces"]
    assert [h.outcome for h in rec.coup.result.hands] == ["win", "lose"]  # type: ignore[union-attr]
    assert returned(rec) == [("box", 0, 2000, 4000), ("box", 1, 2000, 0)]


def test_split_aces_resplit_only_where_the_ruleset_allows() -> None:
    cards = ["AS", "9H", "AD", "7C", "AH", "5C", "KC", "2C"]
    rec = play_bj(R, cards, SEAT2, Scripted(decisions={(2, 0): ["split"]}))
    assert len(rec.coup.boxes[0].hands) == 2  # the new pair of aces stands
    resplit = msgspec.structs.replace(R, resplit_aces=True)
    rec = play_bj(resplit, cards, SEAT2, Scripted(decisions={(2, 0): ["split", "split"]}))
    assert [h.codes for h in rec.coup.boxes[0].hands] == [("AS", "5C"), ("AH", "KC"), ("AD", "2C")]


@pytest.mark.parametrize("hits,dealer", [(False, ("AH", "6C")), (True, ("AH", "6C", "TD"))])
def test_dealer_stands_or_hits_on_soft_17_as_the_ruleset_says(hits: bool, dealer: tuple[str, ...]) -> None:
    rules = msgspec.structs.replace(R, dealer_hits_soft_17=hits)
    rec = play_bj(rules, ["TS", "AH", "8S", "6C", "TD", "3S"], SEAT2)
    assert rec.coup.dealer_cards == dealer


@pytest.mark.parametrize("hits,dealer", [(False, ("AH", "6C")), (True, ("AH", "6C", "TD")),
                                         (False, ("6C", "5C", "2D", "3S", "KH"))])
def test_a_run_drawn_for_the_dealer_holds_each_card_the_dealers_rule_calls_for(
        hits: bool, dealer: tuple[str, ...]) -> None:
    """002 (7), 003 7.6: once every player has acted, the shoe may draw the
    dealer's cards as one run (as the tableau's at baccarat): it holds each
    card the coup itself deals the dealer, and no more."""
    rules = msgspec.structs.replace(R, dealer_hits_soft_17=hits)
    after = ("QD", "JD")  # the next cards in the shoe, which the run must not take
    rec = play_bj(rules, ["TS", dealer[0], "9S", dealer[1], *dealer[2:], *after], SEAT2)
    assert rec.coup.dealer_cards == dealer
    first, drawn = dealer[:2], (*dealer[2:], *after)
    if hand_totals.dealer_must_draw(first, hits):  # a card is due: the run asked for one, and takes what is due
        assert hand_totals.dealer_drawn_on(first, (), 1, hits) == 1  # none drawn yet: the first is drawn
        assert drawn[:hand_totals.dealer_drawn_on(first, drawn, 1, hits)] == dealer[2:]
    else:
        assert dealer[2:] == ()


@pytest.mark.parametrize("takes,back", [("all", 0), ("original_bets", 2000)])
def test_a_dealer_blackjack_without_peek_takes_all_or_only_the_original_bets(takes: str, back: int) -> None:
    rules = msgspec.structs.replace(R, dealer_blackjack_takes=takes)
    rec = play_bj(rules, ["5S", "AH", "6S", "KC", "9D"], SEAT2, Scripted(decisions={(2, 0): ["double"]}))
    assert rec.coup.result is not None and rec.coup.result.dealer_blackjack
    assert returned(rec) == [("box", 0, 4000, back)]


@pytest.mark.parametrize("rounding,paid", [("down", 1501), ("half_up", 1502), ("up", 1502)])
def test_blackjack_pays_three_to_two_rounded_as_the_ruleset_says(rounding: str, paid: int) -> None:
    rules = msgspec.structs.replace(R, payout_rounding=rounding)
    rec = play_bj(rules, ["AS", "9H", "KS", "8C"], wagers((2, "box", 1001)))
    assert returned(rec) == [("box", 0, 1001, 1001 + paid)]


def test_player_blackjack_against_a_dealer_blackjack_is_a_push() -> None:
    rec = play_bj(R, ["AS", "AH", "KS", "QC"], SEAT2)
    assert returned(rec) == [("box", 0, 2000, 2000)]


@pytest.mark.parametrize(
    "book,clause",
    [
        (wagers((2, "box", 999)), "ruleset limits"),
        (wagers((2, "box", 500001)), "ruleset limits"),
        (wagers((2, "box", 0)), "ruleset limits"),
        (wagers((2, "box", -5000)), "ruleset limits"),
        (wagers((9, "box", 2000)), "ruleset seats"),
        (wagers((2, "insurance", 2000)), "ruleset limits"),
        (wagers((2, "box", 2000), (2, "box", 3000)), "wager book"),
        ((), "002 (4)(a)"),
    ],
)
def test_a_book_with_a_wager_out_of_limits_or_seat_is_refused(book: tuple[blackjack_messages.Wager, ...], clause: str) -> None:
    s = bj.fold(bj.decide(R, bj.BlackjackCoup(), blackjack_messages.OpenCoup("c")))
    assert refusal(R, s, blackjack_messages.CloseBetting(book)) == clause
