"""Document 001, rules 8.5 to 8.12: baccarat dealing Styles A and B (Style C's text is cut off)."""

from __future__ import annotations

import msgspec
import pytest

from casino.rules.baccarat import coup as bac
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.errors import RuleViolation
from tests.rules.stacking import Scripted, baccarat, of, play_bac, shoe_rules, supervisor, wagers

R = baccarat("baccarat-001-styles")  # seats, dealer's left to right: 7 6 5 4 3 2 1
NATURAL = ["2S", "3H", "4D", "5C"]


def open_(rules: object, procedure: str, *approvals: baccarat_messages.Approval, shoe_style: str | None = None) -> list[baccarat_messages.AnyBaccaratEvent]:
    return bac.decide(rules, bac.BaccaratCoup(), baccarat_messages.OpenCoup("c", procedure, approvals, shoe_style))  # type: ignore[arg-type]


def test_001_8_5_a_game_dealt_from_a_shoe_keeps_its_style_until_it_ends() -> None:
    with pytest.raises(RuleViolation) as err:
        open_(R, "style_a", shoe_style="style_b")
    assert err.value.clause == "001 8.5"
    assert of(open_(R, "style_b", shoe_style="style_b"), baccarat_messages.CoupOpened)[0].procedure == "style_b"
    non_continuous = msgspec.structs.replace(R, shoe=shoe_rules(R, shuffler="non_continuous_shuffler"))
    with pytest.raises(RuleViolation):
        open_(non_continuous, "style_a", supervisor("style_change"), shoe_style="style_b")


def test_001_8_5_a_continuous_shuffler_changes_style_only_by_approved_procedure() -> None:
    csm = msgspec.structs.replace(R, shoe=shoe_rules(R, shuffler="continuous_shuffler", burn="none"))
    with pytest.raises(RuleViolation) as err:
        open_(csm, "style_a", shoe_style="style_b")
    assert err.value.clause == "001 8.5"
    assert of(open_(csm, "style_a", supervisor("style_change"), shoe_style="style_b"), baccarat_messages.CoupOpened)


def test_001_8_5_the_style_is_the_casino_operators_choice_directed_by_a_supervisor() -> None:
    """At the discretion of the casino operator: a coup in another style than
    the one in force (a new shoe, or a continuous shuffler with the approved
    procedure) is opened only as a supervisor directs, who is recorded."""
    change = baccarat_messages.OpenCoup("c", "style_a", (), None, in_force="style_b")
    with pytest.raises(RuleViolation) as err:
        bac.decide(R, bac.BaccaratCoup(), change)
    assert err.value.clause == "001 8.5" and "supervisor" in err.value.reason
    directed = of(bac.decide(R, bac.BaccaratCoup(), msgspec.structs.replace(change, supervisor="SUP-7")),
                  baccarat_messages.CoupOpened)[0]
    assert (directed.procedure, directed.in_force, directed.supervisor) == ("style_a", "style_b", "SUP-7")

def test_001_8_5_style_c_is_a_named_setting_refused_by_default() -> None:
    with pytest.raises(RuleViolation) as err:
        open_(R, "style_c")
    assert err.value.clause == "001 8.5" and "not in our copy" in err.value.reason
    mapped = msgspec.structs.replace(R, procedures=("style_a", "style_b", "style_c"), style_c="as_style_a")
    assert of(open_(mapped, "style_c"), baccarat_messages.CoupOpened)[0].procedure == "style_a"


def test_001_8_6_initial_four_cards_face_up_and_players_count_announced_first() -> None:
    rec = play_bac(R, NATURAL, "style_a", wagers((2, "banker", 5000)))
    dealt = of(rec.events, baccarat_messages.CardDealt)
    assert [(d.hand, d.face_up, d.by) for d in dealt] == [
        ("player", True, None), ("banker", True, None), ("player", True, None), ("banker", True, None)]
    assert [(c.hand, c.clause) for c in of(rec.events, baccarat_messages.CountAnnounced)] == [
        ("player", "001 8.6"), ("banker", "001 8.6")]


def test_001_8_7_the_dealer_is_at_all_times_in_control_of_the_cards() -> None:
    s = bac.fold(open_(R, "style_a"))
    s = bac.fold(bac.decide(R, s, baccarat_messages.CloseBetting(wagers((2, "banker", 5000)))), s)
    with pytest.raises(RuleViolation) as err:
        bac.decide(R, s, baccarat_messages.DealCard("2S", 0, by=2))
    assert err.value.clause == "001 8.7"
    with pytest.raises(RuleViolation) as err:
        bac.decide(R, s, baccarat_messages.PassCards("player"))
    assert err.value.clause == "001 8.7"
    rec = play_bac(R, NATURAL, "style_a", wagers((2, "banker", 5000)))
    assert not of(rec.events, baccarat_messages.OfferMade) and not of(rec.events, baccarat_messages.CardsPassed)


def test_001_8_8_banker_and_player_are_determined_after_wagers_and_before_the_deal() -> None:
    rec = play_bac(R, NATURAL, "style_b", wagers((2, "banker", 5000), (3, "player", 5000)))
    kinds = [type(e).__name__ for e in rec.events]
    closed, first_card = kinds.index("BettingClosed"), kinds.index("CardDealt")
    roles = [i for i, e in enumerate(rec.events) if isinstance(e, baccarat_messages.HolderAssigned)]
    assert len(roles) == 2 and all(closed < i < first_card for i in roles)


def test_001_8_9_a_the_highest_wager_on_bankers_hand_may_be_banker() -> None:
    rec = play_bac(R, NATURAL, "style_b", wagers((2, "banker", 5000), (5, "banker", 8000), (6, "player", 9000)))
    banker = of(rec.events, baccarat_messages.OfferOrder)[0]
    assert (banker.offer, banker.seats[0]) == ("banker", 5)
    assert bac.fold(rec.events).banker_holder == 5


def test_001_8_9_b_equal_wagers_offered_from_the_lowest_numbered_seat_then_counter_clockwise() -> None:
    book = wagers((6, "banker", 5000), (3, "banker", 5000), (1, "banker", 5000))
    rec = play_bac(R, NATURAL, "style_b", book, Scripted({("banker", 1): False}))
    banker = of(rec.events, baccarat_messages.OfferOrder)[0]
    assert (banker.seats, banker.clause) == ((1, 3, 6), "001 8.9")
    assert [(o.seat, o.clause) for o in of(rec.events, baccarat_messages.OfferMade)][:2] == [(1, "001 8.9(b)"), (3, "001 8.9(b)")]
    assert bac.fold(rec.events).banker_holder == 3


def test_001_8_9_c_then_the_next_highest_wagers_in_the_same_way() -> None:
    book = wagers((6, "banker", 9000), (3, "banker", 5000), (1, "banker", 5000))
    players = Scripted({("banker", 6): False, ("banker", 1): False})
    rec = play_bac(R, NATURAL, "style_b", book, players)
    made = [(o.seat, o.clause) for o in of(rec.events, baccarat_messages.OfferMade) if o.offer == "banker"]
    assert made == [(6, "001 8.9(a)"), (1, "001 8.9(c)"), (3, "001 8.9(b)")]
    assert bac.fold(rec.events).banker_holder == 3


def test_001_8_9_d_nobody_willing_leaves_the_role_to_the_rule_8_18_setting() -> None:
    rec = play_bac(R, NATURAL, "style_b", wagers((2, "banker", 5000)), Scripted({("banker", 2): False}))
    assert R.unfilled_role == "dealer_retains"
    roles = [(h.offer, h.seat, h.clause) for h in of(rec.events, baccarat_messages.HolderAssigned)]
    assert roles == [("banker", None, "001 8.9(d)"), ("player", None, "001 8.9(d)")]
    assert [t.hand for t in of(rec.events, baccarat_messages.CardsTurnedOver)] == ["player", "banker"]
    # No clause of 001 has the dealer turn over or announce under Style B: what decides it is cited.
    assert [(t.hand, t.clause) for t in of(rec.events, baccarat_messages.CardsTurnedOver)] == [
        ("player", "setting unfilled_role"), ("banker", "setting unfilled_role")]
    assert {c.clause for c in of(rec.events, baccarat_messages.CountAnnounced)} == {"game rules"}
    returned = play_bac(R, NATURAL, "style_b", wagers((2, "banker", 5000)),
                        Scripted(returns={2}))
    assert [(t.hand, t.clause) for t in of(returned.events, baccarat_messages.CardsTurnedOver)] == [
        ("player", "setting unfilled_role"), ("banker", "game rules")]
    # The Banker gives the cards back to the dealer unexposed: 8.11(b), the cards are the dealer's to handle.
    assert [(r.hand, r.seat, r.clause) for r in of(returned.events, baccarat_messages.CardsReturned)] == [
        ("banker", 2, "001 8.11(b)")]


def test_001_8_10_player_is_determined_the_same_way_on_players_hand() -> None:
    book = wagers((4, "player", 5000), (2, "player", 5000), (5, "banker", 5000))
    rec = play_bac(R, NATURAL, "style_b", book)
    orders = {o.offer: o.seats for o in of(rec.events, baccarat_messages.OfferOrder)}
    assert orders == {"banker": (5,), "player": (2, 4)}
    assert bac.fold(rec.events).player_holder == 2


def test_001_8_11_a_and_8_11_b_roles_receive_cards_at_the_dealers_instruction_and_only_expose() -> None:
    book = wagers((4, "player", 5000), (5, "banker", 5000))
    rec = play_bac(R, NATURAL, "style_b", book)
    assert [(p.hand, p.seat, p.clause) for p in of(rec.events, baccarat_messages.CardsPassed)] == [
        ("player", 4, "001 8.11(b)"), ("banker", 5, "001 8.11(b)")]
    assert [(e.hand, e.seat, e.clause) for e in of(rec.events, baccarat_messages.HandExposed)] == [
        ("player", 4, "001 8.11(a)"), ("banker", 5, "001 8.11(a)")]
    # The roles never draw: every card, third cards included, comes from the dealer.
    rec = play_bac(R, ["2S", "3H", "2D", "3C", "9H"], "style_b", book)
    assert all(d.by is None for d in of(rec.events, baccarat_messages.CardDealt))


def test_001_8_11_c_puck_marks_the_banker_and_the_player() -> None:
    rec = play_bac(R, NATURAL, "style_b", wagers((4, "player", 5000), (5, "banker", 5000)))
    assert {(h.offer, h.seat, h.clause) for h in of(rec.events, baccarat_messages.HolderAssigned)} == {
        ("banker", 5, "001 8.11(c)"), ("player", 4, "001 8.11(c)")}


def test_001_8_12_initial_four_cards_face_down_to_the_boxes() -> None:
    rec = play_bac(R, NATURAL, "style_b", wagers((4, "player", 5000)))
    dealt = of(rec.events, baccarat_messages.CardDealt)
    assert [(d.hand, d.face_up) for d in dealt] == [
        ("player", False), ("banker", False), ("player", False), ("banker", False)]
