"""Documents 002 (hole card) and 003 (no hole card): the deal, the players' turns,
the dealer's hand, the pick-up and the cut card, clause by clause."""

from __future__ import annotations

import msgspec
import pytest

from casino.rules import play
from casino.rules import shoe as dealing_shoe
from casino.rules.blackjack import coup as bj
from casino.rules.blackjack import hand as hand_totals
from casino.rules.blackjack import messages as blackjack_messages
from casino.rules.errors import RuleViolation
from tests.rules.stacking import Scripted, blackjack, of, play_bj, shoe_rules, stacked_shoe, wagers

HOLE = blackjack("blackjack-002-hole-card")  # seats 1..7 from the dealer's left
NO_HOLE = blackjack("blackjack-003-no-hole-card")
BOOK = wagers((5, "box", 2000), (1, "box", 1000), (3, "box", 3000))
# seat 1: T 8 (18), seat 3: 9 7 (16), seat 5: 5 6 (11); dealer 6 up, then 6 (hold card or second card)
CARDS = ["TS", "9S", "5S", "6D", "8H", "7H", "6C", "6H"]
DEALER = ("6D", "6H", "KD")  # with a king to come, the dealer busts on 22
PLAYERS_FROM_FAR_RIGHT = ("5S", "6C", "9S", "7H", "TS", "8H")


def tail_of(events: list[blackjack_messages.AnyBlackjackEvent]) -> list[tuple[int | None, str]]:
    return [(e.seat, e.card) for e in of(events, blackjack_messages.CardDealt)]


def refused(rules: object, s: bj.BlackjackCoup, cmd: blackjack_messages.AnyBlackjackCommand, clause: str) -> None:
    with pytest.raises(RuleViolation) as err:
        bj.decide(rules, s, cmd)  # type: ignore[arg-type]
    assert err.value.clause == clause, err.value
    assert bj.check(rules, s, cmd) is not None  # type: ignore[arg-type]


def dealt_to_play(rules: object, cards: list[str], book: tuple[blackjack_messages.Wager, ...] = BOOK) -> bj.BlackjackCoup:
    s = bj.BlackjackCoup()
    for cmd in (blackjack_messages.OpenCoup("c"), blackjack_messages.CloseBetting(book)):
        s = bj.fold(bj.decide(rules, s, cmd), s)  # type: ignore[arg-type]
    for i, card in enumerate(cards):
        s = bj.fold(bj.decide(rules, s, blackjack_messages.DealCard(card, i + 1)), s)  # type: ignore[arg-type]
    return s


# ---- 002 ------------------------------------------------------------------


def test_002_1_cards_come_from_the_dealing_shoe_in_order() -> None:
    s = dealt_to_play(HOLE, ["TS"])
    refused(HOLE, s, blackjack_messages.DealCard("9S", 1), "002 (1)")
    rec = play_bj(HOLE, CARDS + ["TD", "2C"], BOOK, Scripted(decisions={(5, 0): ["hit"], (3, 0): ["hit"]}))
    positions = [e.position for e in of(rec.events, blackjack_messages.CardDealt)]
    assert positions == sorted(positions) and positions[0] == 1  # position 0 is the burn card


def test_002_2_the_dealer_places_the_cards_face_up() -> None:
    rec = play_bj(HOLE, CARDS + ["TD", "2C"], BOOK, Scripted(decisions={(5, 0): ["hit"], (3, 0): ["hit"]}))
    downs = [e for e in of(rec.events, blackjack_messages.CardDealt) if not e.face_up]
    assert [(d.seat, d.clause) for d in downs] == [(None, "002 (4)(d)")]


def test_002_3_a_burn_card_goes_to_the_discard_rack_before_the_first_round_of_a_shoe() -> None:
    shoe = stacked_shoe(HOLE.shoe, CARDS + ["TD"], document=HOLE.document)
    play.play_blackjack(HOLE, shoe, "c1", BOOK, Scripted())
    kinds = [type(e).__name__ for e in shoe.events]
    assert kinds[:3] == ["ShoeShuffled", "CardBurned", "RoundStarted"]


def test_002_4_a_to_d_the_order_of_the_deal() -> None:
    rec = play_bj(HOLE, CARDS + ["TD"], BOOK)
    initial = [(e.seat, e.face_up, e.clause) for e in of(rec.events, blackjack_messages.CardDealt)][:8]
    assert initial == [
        (1, True, "002 (4)(a)"), (3, True, "002 (4)(a)"), (5, True, "002 (4)(a)"),
        (None, True, "002 (4)(b)"),
        (1, True, "002 (4)(c)"), (3, True, "002 (4)(c)"), (5, True, "002 (4)(c)"),
        (None, False, "002 (4)(d)"),
    ]
    assert {e.seat for e in of(rec.events, blackjack_messages.CardDealt)} == {1, 3, 5, None}  # no card to an empty box


def test_002_4_d_the_hold_card_stays_unseen_until_all_players_have_acted() -> None:
    s = dealt_to_play(HOLE, CARDS)
    assert s.phase == "playing" and not s.dealer[1].face_up
    for seat in (1, 3):
        s = bj.fold(bj.decide(HOLE, s, blackjack_messages.Decide(seat, 0, "stand")), s)
        assert not s.dealer[1].face_up
    events = bj.decide(HOLE, s, blackjack_messages.Decide(5, 0, "stand"))
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("HandCompleted") < kinds.index("HoleCardTurned")
    assert of(events, blackjack_messages.HoleCardTurned)[0].clause == "002 (7)"


def test_002_5_totals_announced_from_the_dealers_left_and_players_decide_in_turn() -> None:
    s = dealt_to_play(HOLE, CARDS)
    refused(HOLE, s, blackjack_messages.Decide(3, 0, "stand"), "002 (5)")
    refused(HOLE, s, blackjack_messages.Decide(1, 1, "stand"), "002 (5)")
    rec = play_bj(HOLE, CARDS + ["TD"], BOOK)
    announced = [(e.seat, e.total, e.clause) for e in of(rec.events, blackjack_messages.TotalAnnounced) if e.seat is not None]
    assert announced == [(1, 18, "002 (5)"), (3, 16, "002 (5)"), (5, 11, "002 (5)")]


def test_002_6_each_additional_card_face_up_and_the_new_total_announced() -> None:
    rec = play_bj(HOLE, CARDS + ["4C", "3C", "KD"], BOOK, Scripted(decisions={(3, 0): ["hit", "hit"]}))
    extra = [(e.seat, e.card, e.face_up, e.clause) for e in of(rec.events, blackjack_messages.CardDealt) if e.clause == "002 (6)"]
    assert extra == [(3, "4C", True, "002 (6)"), (3, "3C", True, "002 (6)")]
    totals = [(e.total, e.clause) for e in of(rec.events, blackjack_messages.TotalAnnounced) if e.seat == 3]
    assert totals == [(16, "002 (5)"), (20, "002 (6)"), (23, "002 (6)")]
    assert (3, 0, "bust") in [(e.seat, e.hand, e.reason) for e in of(rec.events, blackjack_messages.HandCompleted)]


def test_002_7_hold_card_turned_then_the_dealers_cards_and_total() -> None:
    rec = play_bj(HOLE, CARDS + ["KD"], BOOK)
    assert [type(e).__name__ for e in rec.events[-5:]] == [
        "HoleCardTurned", "CardDealt", "TotalAnnounced", "CoupResulted", "CardsPickedUp"]
    turned = of(rec.events, blackjack_messages.HoleCardTurned)[0]
    drawn = [e for e in of(rec.events, blackjack_messages.CardDealt) if e.seat is None][2:]
    assert (turned.card, [(d.card, d.clause) for d in drawn]) == ("6H", [("KD", "002 (7)")])
    dealer_total = [(e.total, e.clause) for e in of(rec.events, blackjack_messages.TotalAnnounced) if e.seat is None]
    assert dealer_total == [(22, "002 (7)")]


def test_002_8_pick_up_dealers_cards_first_then_from_the_far_right_counter_clockwise() -> None:
    rec = play_bj(HOLE, CARDS + ["KD"], BOOK)
    picked = of(rec.events, blackjack_messages.CardsPickedUp)[0]
    assert (picked.cards, picked.clause) == (DEALER + PLAYERS_FROM_FAR_RIGHT, "002 (8)")


def test_002_9_cut_card_in_the_deal_the_round_is_completed_then_the_cards_reshuffled() -> None:
    rules = msgspec.structs.replace(HOLE, shoe=shoe_rules(HOLE, decks=1, penetration=0.1))
    shoe = stacked_shoe(rules.shoe, CARDS + ["KD"], CARDS + ["KD"], document=rules.document)
    first = play.play_blackjack(rules, shoe, "c1", BOOK, Scripted())
    cut = [e for e in shoe.events if isinstance(e, dealing_shoe.CutCardReached)]
    assert [(c.position, c.first_of_round, c.clause) for c in cut] == [(5, False, "002 (9)")]
    assert first.coup.phase == "finished" and len(of(first.events, blackjack_messages.CardDealt)) == 9
    assert [e.when for e in shoe.events if isinstance(e, dealing_shoe.ReshuffleRequired)] == ["after_round"]
    play.play_blackjack(rules, shoe, "c2", BOOK, Scripted())
    assert [e.shoe_id for e in shoe.events if isinstance(e, dealing_shoe.ShoeShuffled)] == ["shoe-1", "shoe-2"]
    assert [type(e).__name__ for e in shoe.events].count("ShoeEnded") == 1


def test_002_10_no_player_may_handle_or_remove_the_cards() -> None:
    s = dealt_to_play(HOLE, [])
    refused(HOLE, s, blackjack_messages.DealCard("TS", 1, by=1), "002 (10)")


@pytest.mark.parametrize("rules", [HOLE, NO_HOLE], ids=["002_11", "003_7_10"])
def test_002_11_and_003_7_10_the_result_follows_the_cards_not_the_announced_totals(rules: object) -> None:
    rec = play_bj(rules, CARDS + ["KD"], BOOK)  # type: ignore[arg-type]
    tampered = [msgspec.structs.replace(e, total=e.total + 1) if isinstance(e, blackjack_messages.TotalAnnounced) else e
                for e in rec.events]
    s = bj.fold(tampered)
    recomputed = [bj.outcome(h, s.dealer_cards) for b in s.boxes for h in b.hands]
    assert recomputed == [h.outcome for h in rec.coup.result.hands]  # type: ignore[union-attr]
    assert [h.total for h in rec.coup.result.hands] == [hand_totals.total(h.codes)[0] for b in s.boxes for h in b.hands]  # type: ignore[union-attr]
