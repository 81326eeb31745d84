"""Document 003, rules 7.3 to 7.9: blackjack with no hole card."""

from __future__ import annotations

import msgspec

from casino.rules import play
from casino.rules import shoe as dealing_shoe
from casino.rules.blackjack import coup as bj
from casino.rules.blackjack import messages as blackjack_messages
from tests.rules.stacking import Scripted, blackjack, of, play_bj, shoe_rules, stacked_shoe, wagers
from tests.rules.test_blackjack_002_003 import BOOK, CARDS, DEALER, PLAYERS_FROM_FAR_RIGHT, dealt_to_play, refused

R = blackjack("blackjack-003-no-hole-card")
INITIAL = CARDS[:7]  # no hold card: the dealer has only the 6D during the players' turns


def test_003_7_3_a_to_c_the_initial_deal_gives_the_dealer_one_card() -> None:
    rec = play_bj(R, CARDS + ["KD"], BOOK)
    initial = [(e.seat, e.face_up, e.clause) for e in of(rec.events, blackjack_messages.CardDealt)][:7]
    assert initial == [
        (1, True, "003 7.3(a)"), (3, True, "003 7.3(a)"), (5, True, "003 7.3(a)"),
        (None, True, "003 7.3(b)"),
        (1, True, "003 7.3(c)"), (3, True, "003 7.3(c)"), (5, True, "003 7.3(c)"),
    ]
    s = dealt_to_play(R, INITIAL)
    assert s.phase == "playing" and len(s.dealer) == 1


def test_003_7_4_from_the_farthest_left_each_total_announced_and_each_player_decides_in_turn() -> None:
    s = dealt_to_play(R, INITIAL)
    refused(R, s, blackjack_messages.Decide(5, 0, "double"), "003 7.4")
    rec = play_bj(R, INITIAL + ["9C", "6H", "KD"], BOOK, Scripted(decisions={(5, 0): ["double"]}))
    announced = [(e.seat, e.total, e.clause) for e in of(rec.events, blackjack_messages.TotalAnnounced) if e.seat is not None]
    assert announced[:3] == [(1, 18, "003 7.4"), (3, 16, "003 7.4"), (5, 11, "003 7.4")]
    assert [(d.seat, d.action) for d in of(rec.events, blackjack_messages.DecisionTaken)] == [
        (1, "stand"), (3, "stand"), (5, "double")]


def test_003_7_5_additional_cards_face_up_with_the_total_announced_after_each() -> None:
    rec = play_bj(R, INITIAL + ["2C", "KC", "6H", "KD"], BOOK, Scripted(decisions={(3, 0): ["hit", "hit"]}))
    extra = [(e.card, e.face_up, e.clause) for e in of(rec.events, blackjack_messages.CardDealt) if e.seat == 3][2:]
    assert extra == [("2C", True, "003 7.5"), ("KC", True, "003 7.5")]
    assert [(e.total, e.clause) for e in of(rec.events, blackjack_messages.TotalAnnounced) if e.seat == 3] == [
        (16, "003 7.4"), (18, "003 7.5"), (28, "003 7.5")]


def test_003_7_6_the_dealers_second_card_comes_after_every_player_has_acted() -> None:
    rec = play_bj(R, CARDS + ["KD"], BOOK)
    kinds = [(type(e).__name__, getattr(e, "seat", 0)) for e in rec.events]
    last_player = max(i for i, (k, _) in enumerate(kinds) if k == "HandCompleted")
    second = [i for i, e in enumerate(rec.events) if isinstance(e, blackjack_messages.CardDealt) and e.seat is None][1]
    assert last_player < second
    dealer = [(e.card, e.face_up, e.clause) for e in of(rec.events, blackjack_messages.CardDealt) if e.seat is None]
    assert dealer == [("6D", True, "003 7.3(b)"), ("6H", True, "003 7.6"), ("KD", True, "003 7.6")]
    assert [(e.total, e.clause) for e in of(rec.events, blackjack_messages.TotalAnnounced) if e.seat is None] == [(22, "003 7.6")]
    assert not of(rec.events, blackjack_messages.HoleCardTurned)


def test_003_7_7_a_and_b_players_cards_from_the_far_right_then_the_dealers_underneath() -> None:
    rec = play_bj(R, CARDS + ["KD"], BOOK)
    picked = of(rec.events, blackjack_messages.CardsPickedUp)[0]
    assert (picked.cards, picked.clause) == (PLAYERS_FROM_FAR_RIGHT + DEALER, "003 7.7")


def test_003_7_8_cut_card_reached_during_a_round_completes_the_round_then_reshuffles() -> None:
    rules = msgspec.structs.replace(R, shoe=shoe_rules(R, decks=1, penetration=0.1))
    shoe = stacked_shoe(rules.shoe, CARDS + ["KD"], CARDS + ["KD"], document=rules.document)
    rec = play.play_blackjack(rules, shoe, "c1", BOOK, Scripted())
    assert rec.coup.phase == "finished"
    assert [(c.first_of_round, c.clause) for c in shoe.events if isinstance(c, dealing_shoe.CutCardReached)] == [
        (False, "003 7.8")]
    assert [(e.when, e.clause) for e in shoe.events if isinstance(e, dealing_shoe.ReshuffleRequired)] == [
        ("after_round", "003 7.8")]


def test_003_7_9_cut_card_as_the_first_card_of_a_new_round_reshuffles_at_once() -> None:
    # One deck, cut card before position 7: round one (one box) takes positions 1-6.
    rules = msgspec.structs.replace(R, shoe=shoe_rules(R, decks=1, penetration=0.135))
    one = wagers((4, "box", 1000))
    shoe = stacked_shoe(rules.shoe, ["TS", "6D", "8H", "5C", "2C", "KD", "AC"], ["9H", "7D", "9C", "TD"], document=rules.document)
    play.play_blackjack(rules, shoe, "c1", one, Scripted())
    assert shoe.state.position == 7 and shoe.state.cut_index == 7
    second = play.play_blackjack(rules, shoe, "c2", one, Scripted())
    # c2 started on the old shoe; its first draw hit the cut card: reshuffled at once, dealt from shoe-2
    kinds = [type(e).__name__ for e in shoe.events]
    i = kinds.index("CutCardReached")
    assert kinds[i : i + 5] == ["CutCardReached", "ReshuffleRequired", "ShoeEnded", "ShoeShuffled", "CardBurned"]
    assert [e.clause for e in shoe.events if isinstance(e, dealing_shoe.CutCardReached)] == ["003 7.9"]
    assert [e.card for e in of(second.events, blackjack_messages.CardDealt)][:3] == ["9H", "7D", "9C"]
    assert bj.fold(second.events).result is not None
