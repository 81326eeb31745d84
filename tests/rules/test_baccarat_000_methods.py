"""Document 000, section 8: baccarat dealing Methods A, B, C and D, clause by clause."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from casino.config.tables import TableConfig, dump_tables, load_tables
from casino.rules.baccarat import coup as bac
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.errors import RuleViolation
from tests.rules.stacking import Scripted, baccarat, inspector, of, play_bac, supervisor, wagers

R = baccarat()  # seats, dealer's left to right: 14 12 11 10 9 8 7 6 5 3 2 1
NATURAL = ["2S", "3H", "4D", "5C"]  # Player 6, Banker 8: no third card
DRAWS = ["2S", "3H", "2D", "3C", "9H"]  # Player 4 draws a nine (3); Banker 6 stands against a nine


def opened(procedure: str, book: tuple[baccarat_messages.Wager, ...] | None = None, approvals: tuple[baccarat_messages.Approval, ...] = (),
           **kw: object) -> bac.BaccaratCoup:
    s = bac.fold(bac.decide(R, bac.BaccaratCoup(), baccarat_messages.OpenCoup("c", procedure, approvals, **kw)))  # type: ignore[arg-type]
    if book is not None:
        s = bac.fold(bac.decide(R, s, baccarat_messages.CloseBetting(book)), s)
    return s


def step(s: bac.BaccaratCoup, cmd: baccarat_messages.AnyBaccaratCommand) -> bac.BaccaratCoup:
    return bac.fold(bac.decide(R, s, cmd), s)


def refused(s: bac.BaccaratCoup, cmd: baccarat_messages.AnyBaccaratCommand, clause: str) -> None:
    with pytest.raises(RuleViolation) as err:
        bac.decide(R, s, cmd)
    assert err.value.clause == clause, err.value
    assert bac.check(R, s, cmd) is not None


# ---- 8.1, 8.2 -------------------------------------------------------------


def test_000_8_1_shoe_is_retained_by_the_dealer_under_methods_a_and_b() -> None:
    for procedure, approvals in (("method_a", ()), ("method_b", (inspector(),))):
        s = opened(procedure, wagers((1, "player", 5000)), approvals)
        refused(s, baccarat_messages.DealCard("2S", 0, by=1), "000 8.1")
        assert bac.awaiting(s).seat is None


def test_000_8_2_only_the_methods_the_ruleset_allows() -> None:
    only_a = msgspec.structs.replace(R, procedures=("method_a",))
    with pytest.raises(RuleViolation) as err:
        bac.decide(only_a, bac.BaccaratCoup(), baccarat_messages.OpenCoup("c", "method_b", (inspector(),)))
    assert err.value.clause == "000 8.2"



def test_000_8_2_the_method_in_force_changes_only_at_a_supervisors_direction_and_the_coup_records_who() -> None:
    """The casino chooses the method (8.2), not the table's terminal: a coup
    by another method than the one in force is opened only as a supervisor
    directs, and records the method it replaced and the supervisor."""
    change = baccarat_messages.OpenCoup("c", "method_c", (inspector(),), in_force="method_a")
    with pytest.raises(RuleViolation) as err:
        bac.decide(R, bac.BaccaratCoup(), change)
    assert err.value.clause == "000 8.2" and "supervisor" in err.value.reason
    kept = of(bac.decide(R, bac.BaccaratCoup(), baccarat_messages.OpenCoup("c", "method_a", in_force="method_a")),
              baccarat_messages.CoupOpened)[0]
    assert (kept.procedure, kept.in_force, kept.supervisor) == ("method_a", "method_a", "")
    directed = of(bac.decide(R, bac.BaccaratCoup(), msgspec.structs.replace(change, supervisor="SUP-7")),
                  baccarat_messages.CoupOpened)[0]
    assert (directed.procedure, directed.in_force, directed.supervisor) == ("method_c", "method_a", "SUP-7")

# ---- Method A: 8.3 --------------------------------------------------------


def test_000_8_3_1_method_a_deals_both_hands_face_up() -> None:
    rec = play_bac(R, NATURAL, "method_a", wagers((1, "player", 5000)))
    dealt = of(rec.events, baccarat_messages.CardDealt)
    assert [d.hand for d in dealt] == ["player", "banker", "player", "banker"]
    assert all(d.face_up and d.by is None for d in dealt)
    assert not of(rec.events, baccarat_messages.CardsTurnedOver)


def test_000_8_3_2_announces_players_count_then_bankers() -> None:
    rec = play_bac(R, NATURAL, "method_a", wagers((1, "player", 5000)))
    counts = [(c.hand, c.points, c.clause) for c in of(rec.events, baccarat_messages.CountAnnounced)]
    assert counts == [("player", 6, "000 8.3.2"), ("banker", 8, "000 8.3.2")]


# ---- Method B: 8.4 - 8.14 --------------------------------------------------


def test_000_8_4_method_b_only_with_an_inspectors_prior_approval() -> None:
    with pytest.raises(RuleViolation) as err:
        opened("method_b")
    assert err.value.clause == "000 8.4"
    with pytest.raises(RuleViolation):  # a supervisor is not an inspector
        opened("method_b", approvals=(supervisor("method_b"),))
    assert opened("method_b", approvals=(inspector(),)).procedure == "method_b"


def test_000_8_4_the_approval_is_recorded_with_the_conditions_the_inspector_imposed(tmp_path: Path) -> None:
    """"subject to any conditions imposed by, the Inspector": the coup's record
    holds the approval whole, as the casino's configuration gives it."""
    approval = baccarat_messages.Approval("method_b", "inspector", "INS-9", "tables BAC000-* only; 25 the least wager",
                                          "2026-01-15")
    assert opened("method_b", approvals=(approval,)).approvals == (approval,)
    tables = {"BAC-1": TableConfig("baccarat-000-methods", approvals=(approval,))}
    (tmp_path / "tables.toml").write_text(dump_tables(tables))
    assert load_tables(tmp_path / "tables.toml")["BAC-1"].approvals == (approval,)  # the tables file keeps it all


def test_000_8_5_cards_go_face_down_to_the_highest_wager_on_each_hand() -> None:
    book = wagers((3, "player", 5000), (5, "player", 9000), (6, "banker", 7000), (2, "banker", 2500))
    rec = play_bac(R, NATURAL, "method_b", book, approvals=(inspector(),))
    assert all(not d.face_up for d in of(rec.events, baccarat_messages.CardDealt))
    held = {(h.offer, h.seat) for h in of(rec.events, baccarat_messages.HolderAssigned)}
    assert held == {("player", 5), ("banker", 6)}
    assert [(p.hand, p.seat) for p in of(rec.events, baccarat_messages.CardsPassed)] == [("player", 5), ("banker", 6)]


def test_000_8_6_a_refusal_passes_the_cards_to_the_next_highest_wager() -> None:
    book = wagers((3, "player", 5000), (5, "player", 9000), (6, "banker", 7000))
    rec = play_bac(R, NATURAL, "method_b", book, Scripted({("player", 5): False}), (inspector(),))
    offers = [(o.offer, o.seat, o.clause) for o in of(rec.events, baccarat_messages.OfferMade)]
    assert offers == [("player", 5, "000 8.5"), ("player", 3, "000 8.6"), ("banker", 6, "000 8.5")]
    assert bac.fold(rec.events).player_holder == 3


def test_000_8_7_equal_highest_wagers_go_first_to_the_seat_nearest_the_dealers_right() -> None:
    book = wagers((7, "player", 5000), (3, "player", 5000), (10, "player", 5000), (1, "player", 3000))
    rec = play_bac(R, NATURAL, "method_b", book, approvals=(inspector(),))
    assert of(rec.events, baccarat_messages.OfferOrder)[0].seats == (3, 7, 10, 1)
    assert of(rec.events, baccarat_messages.OfferMade)[0].clause == "000 8.7"  # seat 3 is nearest the dealer's right among the tied
    assert bac.fold(rec.events).player_holder == 3


def test_000_8_8_a_refusal_among_equal_wagers_moves_counter_clockwise() -> None:
    book = wagers((7, "player", 5000), (3, "player", 5000), (10, "player", 5000))
    players = Scripted({("player", 3): False, ("player", 7): False})
    rec = play_bac(R, NATURAL, "method_b", book, players, (inspector(),))
    assert [o.seat for o in of(rec.events, baccarat_messages.OfferMade) if o.offer == "player"] == [3, 7, 10]
    assert [o.clause for o in of(rec.events, baccarat_messages.OfferMade)][1] == "000 8.8"
    assert bac.fold(rec.events).player_holder == 10


def test_000_8_9_markers_go_in_front_of_the_players_who_accept() -> None:
    rec = play_bac(R, NATURAL, "method_b", wagers((3, "player", 5000), (6, "banker", 5000)), approvals=(inspector(),))
    markers = [(h.offer, h.seat, h.clause) for h in of(rec.events, baccarat_messages.HolderAssigned)]
    assert markers == [("player", 3, "000 8.9"), ("banker", 6, "000 8.9")]


def test_000_8_10_1_dealer_retains_the_cards_of_a_hand_nobody_wagered_on() -> None:
    rec = play_bac(R, NATURAL, "method_b", wagers((3, "player", 5000)), approvals=(inspector(),))
    banker = [h for h in of(rec.events, baccarat_messages.HolderAssigned) if h.offer == "banker"]
    assert [(h.seat, h.clause) for h in banker] == [(None, "000 8.10.1")]
    assert not [p for p in of(rec.events, baccarat_messages.CardsPassed) if p.hand == "banker"]


def test_000_8_10_2_dealer_retains_the_cards_when_every_wagerer_refuses() -> None:
    book = wagers((3, "banker", 5000), (5, "banker", 9000))
    players = Scripted({("banker", 3): False, ("banker", 5): False})
    rec = play_bac(R, NATURAL, "method_b", book, players, (inspector(),))
    banker = [h for h in of(rec.events, baccarat_messages.HolderAssigned) if h.offer == "banker"]
    assert [(h.seat, h.clause) for h in banker] == [(None, "000 8.10.2")]


def test_000_8_11_only_one_hand_is_handled_by_players_at_a_time() -> None:
    s = opened("method_b", wagers((3, "player", 5000), (6, "banker", 5000)), (inspector(),))
    for i, card in enumerate(NATURAL):
        s = step(s, baccarat_messages.DealCard(card, i))
    s = step(s, baccarat_messages.AnswerOffer(3, True))
    refused(s, baccarat_messages.PassCards("banker"), "000 8.11")  # Player's cards first
    s = step(s, baccarat_messages.PassCards("player"))
    assert s.out == "player"
    refused(s, baccarat_messages.PassCards("banker"), "000 8.11")  # the Player's Hand is still out
    s = step(s, baccarat_messages.ExposeHand(3, "player"))
    s = step(s, baccarat_messages.AnswerOffer(6, True))
    s = step(s, baccarat_messages.PassCards("banker"))
    assert s.out == "banker"


def test_000_8_12_cards_leaving_full_view_are_reported_against_the_handler() -> None:
    s = opened("method_b", wagers((3, "player", 5000)), (inspector(),))
    for i, card in enumerate(NATURAL):
        s = step(s, baccarat_messages.DealCard(card, i))
    s = step(step(s, baccarat_messages.AnswerOffer(3, True)), baccarat_messages.PassCards("player"))
    events = bac.decide(R, s, baccarat_messages.ReportHandlingBreach(3, "player", "held below the table edge"))
    assert [(e.seat, e.clause) for e in of(events, baccarat_messages.HandlingBreachReported)] == [(3, "000 8.12")]
    refused(s, baccarat_messages.ReportHandlingBreach(5, "player"), "000 8.12")


def test_000_8_13_only_the_designated_player_may_expose_the_hand() -> None:
    s = opened("method_b", wagers((3, "player", 5000), (5, "player", 2600)), (inspector(),))
    for i, card in enumerate(NATURAL):
        s = step(s, baccarat_messages.DealCard(card, i))
    s = step(step(s, baccarat_messages.AnswerOffer(3, True)), baccarat_messages.PassCards("player"))
    refused(s, baccarat_messages.ExposeHand(5, "player"), "000 8.13")
    events = bac.decide(R, s, baccarat_messages.ExposeHand(3, "player"))
    assert of(events, baccarat_messages.HandExposed)[0].clause == "000 8.13"


def test_000_8_14_1_and_8_14_2_dealer_collects_and_turns_over_unexposed_cards() -> None:
    book = wagers((3, "player", 5000), (6, "banker", 5000))
    rec = play_bac(R, NATURAL, "method_b", book, Scripted(returns={6}), (inspector(),))
    turned = of(rec.events, baccarat_messages.CardsTurnedOver)
    assert [(t.hand, t.positions, t.clause) for t in turned] == [("banker", (4, 6), "000 8.14.2")]
    returned = of(rec.events, baccarat_messages.CardsReturned)  # the dealer collects them: 8.14.1
    assert [(r.hand, r.seat, r.clause) for r in returned] == [("banker", 6, "000 8.14.1")]
    assert all(d.face_up for d in bac.fold(rec.events).cards)


def test_000_8_9_the_marker_names_the_player_a_hands_cards_go_to() -> None:
    """Under Method B the record names who handled each hand's cards, not only the seat."""
    from casino.rules.wagers import Wager

    book = (Wager(3, "player", 5000, "ann"), Wager(6, "banker", 5000, "bob"))
    rec = play_bac(R, NATURAL, "method_b", book, approvals=(inspector(),))
    assert [(h.offer, h.seat, h.player) for h in of(rec.events, baccarat_messages.HolderAssigned)] == [
        ("player", 3, "ann"), ("banker", 6, "bob")]


def test_000_8_14_3_announces_players_count_then_bankers() -> None:
    rec = play_bac(R, NATURAL, "method_b", wagers((3, "player", 5000)), approvals=(inspector(),))
    counts = [(c.hand, c.clause) for c in of(rec.events, baccarat_messages.CountAnnounced)]
    assert counts == [("player", "000 8.14.3"), ("banker", "000 8.14.3")]
    turned_or_exposed = [i for i, e in enumerate(rec.events) if isinstance(e, baccarat_messages.CardsTurnedOver | baccarat_messages.HandExposed)]
    first_count = next(i for i, e in enumerate(rec.events) if isinstance(e, baccarat_messages.CountAnnounced))
    assert max(turned_or_exposed) < first_count


# ---- Method C: 8.15 - 8.24 --------------------------------------------------


def test_000_8_15_shoe_offered_counter_clockwise_from_the_lowest_numbered_seat_with_a_wager() -> None:
    book = wagers((9, "banker", 5000), (2, "player", 2500), (12, "tie", 500), (5, "banker", 9000))
    rec = play_bac(R, NATURAL, "method_c", book, Scripted({("shoe", 2): False}))
    order = of(rec.events, baccarat_messages.OfferOrder)[0]
    assert (order.offer, order.seats, order.clause) == ("shoe", (2, 5, 9, 12), "000 8.15")
    assert bac.fold(rec.events).shoe_holder == 5


@pytest.mark.parametrize("procedure,clause", [("method_c", "000 8.16"), ("method_d", "000 8.26")])
def test_000_8_16_and_8_26_all_players_declining_the_shoe_falls_back_to_method_a_or_b(
    procedure: str, clause: str
) -> None:
    book = wagers((2, "player", 5000), (5, "banker", 5000))
    players = Scripted({("shoe", 2): False, ("shoe", 5): False})
    rec = play_bac(R, NATURAL, procedure, book, players)
    assert [(f.procedure, f.clause) for f in of(rec.events, baccarat_messages.ProcedureFellBack)] == [("method_a", clause)]
    assert all(d.face_up and d.by is None for d in of(rec.events, baccarat_messages.CardDealt))
    import msgspec

    to_b = msgspec.structs.replace(R, fallback_method="method_b")
    with pytest.raises(RuleViolation) as err:  # falling back to B still needs the inspector (8.4)
        bac.decide(to_b, bac.BaccaratCoup(), baccarat_messages.OpenCoup("c", procedure))
    assert err.value.clause == "000 8.4"
    rec = play_bac(to_b, NATURAL, procedure, book, players, (inspector(),))
    assert bac.fold(rec.events).procedure == "method_b"
    assert of(rec.events, baccarat_messages.CardsPassed)


@pytest.mark.parametrize("procedure,clause", [("method_c", "000 8.21"), ("method_d", "000 8.30")])
def test_000_8_17_1_and_8_27_1_the_shoe_holder_plays_bankers_hand(procedure: str, clause: str) -> None:
    rec = play_bac(R, NATURAL, procedure, wagers((2, "banker", 5000)))
    s = bac.fold(rec.events)
    assert (s.shoe_holder, s.holder_plays) == (2, "banker")
    assert [h.clause for h in of(rec.events, baccarat_messages.HolderAssigned)] == [clause]
    # The holder handles Banker's Hand; the dealer plays (and turns over) Player's.
    assert [(e.hand, e.seat) for e in of(rec.events, baccarat_messages.HandExposed)] == [("banker", 2)]
    assert [t.hand for t in of(rec.events, baccarat_messages.CardsTurnedOver)] == ["player"]


@pytest.mark.parametrize("procedure,clause", [("method_c", "000 8.17.2"), ("method_d", "000 8.27.2")])
def test_000_8_17_2_and_8_27_2_holder_plays_players_hand_only_with_a_supervisors_approval(
    procedure: str, clause: str
) -> None:
    s = opened(procedure, wagers((2, "player", 5000)))
    refused(s, baccarat_messages.AnswerOffer(2, True, "player"), clause)
    s = opened(procedure, wagers((2, "player", 5000)), (supervisor("holder_plays_player"),))
    s = step(s, baccarat_messages.AnswerOffer(2, True, "player"))
    assert (s.shoe_holder, s.holder_plays) == (2, "player")


def test_000_8_18_the_holder_keeps_the_shoe_until_passing_it_or_losing() -> None:
    book = wagers((2, "banker", 5000), (5, "player", 5000))
    won = play_bac(R, NATURAL, "method_c", book)  # Banker 8 beats Player 6: the holder keeps the shoe
    assert bac.shoe_holder_after(won.coup) == 2
    nxt = play_bac(R, NATURAL, "method_c", book, shoe_holder=2)
    assert not of(nxt.events, baccarat_messages.OfferMade)
    assert [(h.seat, h.clause) for h in of(nxt.events, baccarat_messages.HolderAssigned)] == [(2, "000 8.18")]
    tie = play_bac(R, ["4S", "3H", "4D", "5C"], "method_c", book)  # 8 v 8: a tie is not a loss
    assert bac.shoe_holder_after(tie.coup) == 2
    lose = play_bac(R, ["4S", "2H", "5D", "5C"], "method_c", book)  # Player 9 beats Banker 7
    assert [(g.seat, g.reason, g.clause) for g in of(lose.events, baccarat_messages.ShoeGivenUp)] == [(2, "lost", "000 8.18")]
    assert bac.shoe_holder_after(lose.coup) is None
    passing = step(opened("method_c", shoe_holder=2), baccarat_messages.PassShoe(2))
    assert passing.shoe_holder is None
    assert bac.shoe_holder_after(step(won.coup, baccarat_messages.PassShoe(2))) is None


@pytest.mark.parametrize("procedure", ["method_a", "method_b", "method_d"])
def test_000_8_18_no_coup_under_another_method_while_a_player_holds_the_shoe(procedure: str) -> None:
    book = wagers((2, "banker", 5000), (5, "player", 5000))
    won = play_bac(R, NATURAL, "method_c", book)
    assert bac.shoe_holder_after(won.coup) == 2
    with pytest.raises(RuleViolation) as err:
        opened(procedure, approvals=(inspector(),), shoe_holder=2)
    assert err.value.clause == "000 8.18" and "seat 2 holds the shoe" in str(err.value)
    # Given up first, by a recorded event with its cause, the next coup may be dealt by any method.
    for give_up, reason, clause in ((baccarat_messages.PassShoe(2), "passed", "000 8.18"),
                                    (baccarat_messages.ForfeitShoe(2, "SUP-7"), "forfeited", "000 8.20")):
        events = bac.decide(R, won.coup, give_up)
        assert [(g.seat, g.reason, g.clause) for g in of(events, baccarat_messages.ShoeGivenUp)] == [(2, reason, clause)]
        assert bac.shoe_holder_after(bac.fold(events, won.coup)) is None
    assert of(bac.decide(R, won.coup, baccarat_messages.ForfeitShoe(2, "SUP-7")), baccarat_messages.ShoeGivenUp)[0].supervisor == "SUP-7"
    assert opened(procedure, approvals=(inspector(),)).procedure == procedure


@pytest.mark.parametrize("book,result,kept", [
    (((2, "player", 5000),), NATURAL, False),              # plays Banker's Hand, which wins; his Player wager loses
    (((2, "player", 5000),), ["4S", "2H", "5D", "5C"], True),  # Player 9 wins: his own wager won
    (((2, "banker", 5000), (2, "player", 5000)), NATURAL, False),  # both hands: one of them loses
    (((2, "banker", 5000), (2, "player", 5000)), ["4S", "3H", "4D", "5C"], True),  # a tie: both push
    (((2, "tie", 2500),), NATURAL, False),                  # only a Tie wager, and no tie
    (((2, "tie", 2500),), ["4S", "3H", "4D", "5C"], True),
    (((2, "banker", 5000), (2, "player_pair", 500)), NATURAL, False),  # a pair wager that does not come loses
])
def test_000_8_18_the_shoe_passes_when_the_holders_own_wager_loses(
    book: tuple[tuple[int, str, int], ...], result: list[str], kept: bool
) -> None:
    rec = play_bac(R, result, "method_c", wagers(*book))
    assert bac.fold(rec.events).holder_plays == "banker"
    assert (bac.shoe_holder_after(rec.coup) == 2) is kept
    lost = of(rec.events, baccarat_messages.ShoeGivenUp)
    assert [(g.seat, g.reason, g.clause) for g in lost] == ([] if kept else [(2, "lost", "000 8.18")])


def test_000_8_18_read_as_the_hand_played_losing_is_a_named_setting() -> None:
    import msgspec

    by_hand = msgspec.structs.replace(R, holder_loses_shoe="hand_played")
    rec = play_bac(by_hand, NATURAL, "method_c", wagers((2, "player", 5000)))  # Banker's Hand, the one he plays, wins
    assert bac.shoe_holder_after(rec.coup) == 2
    rec = play_bac(by_hand, ["4S", "2H", "5D", "5C"], "method_c", wagers((2, "player", 5000)))
    assert bac.shoe_holder_after(rec.coup) is None


def test_000_8_15_and_8_18_a_holder_with_no_wager_gives_up_the_shoe_and_it_is_offered_afresh() -> None:
    book = wagers((3, "banker", 5000), (5, "player", 5000))
    rec = play_bac(R, NATURAL, "method_c", book, shoe_holder=2)
    assert [(g.seat, g.reason, g.clause) for g in of(rec.events, baccarat_messages.ShoeGivenUp)] == [(2, "no_wager", "000 8.15")]
    assert [(o.seats, o.clause) for o in of(rec.events, baccarat_messages.OfferOrder)] == [((3, 5), "000 8.15")]
    given, offered = rec.events.index(of(rec.events, baccarat_messages.ShoeGivenUp)[0]), rec.events.index(of(rec.events, baccarat_messages.OfferOrder)[0])
    assert given < offered  # given up before the fresh offer, with its cause
    assert [h.seat for h in of(rec.events, baccarat_messages.HolderAssigned)] == [3]
    assert bac.shoe_holder_after(rec.coup) == 3  # Banker wins: the new holder keeps the shoe into the next coup


def test_000_8_18_and_8_15_the_shoe_goes_with_the_player_who_accepted_it_not_with_his_seat() -> None:
    """Ann accepts the shoe at seat 2 and keeps it; she leaves, Bob sits at
    seat 2 and wagers: the shoe is given up with its cause (Ann left) and
    offered afresh under 8.15, Bob among those with a wager, never kept by
    the seat. Ann still at seat 2 keeps it (8.18)."""
    from casino.rules.wagers import Wager

    ann = (Wager(2, "banker", 5000, "ann"), Wager(5, "player", 5000, "cy"))
    won = play_bac(R, NATURAL, "method_c", ann)  # Banker wins: Ann keeps the shoe into the next coup
    assert (bac.shoe_holder_after(won.coup), bac.shoe_holder_player_after(won.coup)) == (2, "ann")
    assert [h.player for h in of(won.events, baccarat_messages.HolderAssigned)] == ["ann"]
    kept = play_bac(R, NATURAL, "method_c", ann, shoe_holder=2, shoe_holder_player="ann")
    assert [(h.seat, h.player, h.clause) for h in of(kept.events, baccarat_messages.HolderAssigned)] == [
        (2, "ann", "000 8.18")]
    bob = (Wager(2, "banker", 5000, "bob"), Wager(5, "player", 5000, "cy"))
    rec = play_bac(R, NATURAL, "method_c", bob, shoe_holder=2, shoe_holder_player="ann")
    assert [(g.seat, g.reason, g.clause, g.player) for g in of(rec.events, baccarat_messages.ShoeGivenUp)] == [
        (2, "left", "000 8.18", "ann")]  # the player who held it, who left
    assert [(o.seats, o.clause) for o in of(rec.events, baccarat_messages.OfferOrder)] == [((2, 5), "000 8.15")]
    assert of(rec.events, baccarat_messages.OfferMade)  # offered afresh, not kept
    assert not [h for h in of(rec.events, baccarat_messages.HolderAssigned) if h.clause == "000 8.18"]


def test_000_8_18_a_player_given_the_shoe_after_it_was_passed_keeps_it() -> None:
    s = step(opened("method_c", shoe_holder=2), baccarat_messages.PassShoe(2))
    s = step(s, baccarat_messages.CloseBetting(wagers((2, "banker", 5000), (5, "banker", 5000))))
    s = step(s, baccarat_messages.AnswerOffer(2, False))
    s = step(s, baccarat_messages.AnswerOffer(5, True))
    for i, card in enumerate(NATURAL):
        s = step(s, baccarat_messages.DealCard(card, i, by=5))
    s = step(s, baccarat_messages.ExposeHand(5, "banker"))
    assert s.phase == "finished" and s.result is not None and s.result.winner == "banker"
    assert bac.shoe_holder_after(s) == 5


@pytest.mark.parametrize("procedure,clause", [("method_c", "000 8.19"), ("method_d", "000 8.28")])
def test_000_8_19_and_8_28_the_holder_draws_face_down_only_at_the_dealers_instruction(
    procedure: str, clause: str
) -> None:
    s = step(opened(procedure, wagers((2, "banker", 5000), (5, "player", 2500))), baccarat_messages.AnswerOffer(2, True))
    refused(s, baccarat_messages.DealCard("2S", 0, by=None), clause)  # the dealer does not draw: the holder does
    refused(s, baccarat_messages.DealCard("2S", 0, by=5), clause)
    rec = play_bac(R, DRAWS, procedure, wagers((2, "banker", 5000)))
    dealt = of(rec.events, baccarat_messages.CardDealt)
    assert all(d.by == 2 and not d.face_up for d in dealt)
    finished = rec.coup
    refused(finished, baccarat_messages.DealCard("7S", 9, by=2), "tableau")  # no card without the dealer's instruction


@pytest.mark.parametrize("procedure,clause", [("method_c", "000 8.20"), ("method_d", "000 8.29")])
def test_000_8_20_and_8_29_a_supervisor_may_direct_the_holder_to_forfeit_the_shoe(
    procedure: str, clause: str
) -> None:
    s = step(opened(procedure, wagers((2, "banker", 5000))), baccarat_messages.AnswerOffer(2, True))
    events = bac.decide(R, s, baccarat_messages.ForfeitShoe(2, "SUP-7"))
    assert [(g.seat, g.reason, g.clause) for g in of(events, baccarat_messages.ShoeGivenUp)] == [(2, "forfeited", clause)]
    s = bac.fold(events, s)
    assert s.procedure == "method_a" and s.shoe_holder is None
    assert bac.awaiting(s).seat is None  # the dealer deals from here
    refused(s, baccarat_messages.ForfeitShoe(2, "SUP-7"), clause)


def holding(procedure: str) -> bac.BaccaratCoup:
    """A coup where seat 2 holds the shoe and has dealt the four cards."""
    s = step(opened(procedure, wagers((2, "banker", 5000))), baccarat_messages.AnswerOffer(2, True))
    for i, card in enumerate(NATURAL):
        s = step(s, baccarat_messages.DealCard(card, i, by=2))
    return s


@pytest.mark.parametrize("procedure,clause", [("method_c", "000 8.22"), ("method_d", "000 8.31")])
def test_000_8_22_and_8_31_cards_leaving_full_view_are_reported_against_the_holder(procedure: str, clause: str) -> None:
    s = holding(procedure)
    assert of(bac.decide(R, s, baccarat_messages.ReportHandlingBreach(2, "banker")), baccarat_messages.HandlingBreachReported)[0].clause == clause
    refused(s, baccarat_messages.ReportHandlingBreach(5, "banker"), clause)


@pytest.mark.parametrize("procedure,clause", [("method_c", "000 8.23"), ("method_d", "000 8.32")])
def test_000_8_23_and_8_32_having_checked_the_cards_the_holder_may_expose_the_hand(procedure: str, clause: str) -> None:
    s = holding(procedure)
    refused(s, baccarat_messages.ExposeHand(5, "banker"), clause)
    refused(s, baccarat_messages.ExposeHand(2, "player"), clause)  # the dealer's hand is not the holder's to expose
    assert of(bac.decide(R, s, baccarat_messages.ExposeHand(2, "banker")), baccarat_messages.HandExposed)[0].clause == clause
    assert not of(bac.decide(R, s, baccarat_messages.ReturnCards(2, "banker")), baccarat_messages.HandExposed)  # may, not must


@pytest.mark.parametrize("procedure,clause", [("method_c", "000 8.24.2"), ("method_d", "000 8.33.2")])
def test_000_8_24_1_8_24_2_and_8_33_1_8_33_2_dealer_collects_and_turns_over_unexposed_cards(
    procedure: str, clause: str
) -> None:
    events = bac.decide(R, holding(procedure), baccarat_messages.ReturnCards(2, "banker"))
    assert [(t.hand, t.positions, t.clause) for t in of(events, baccarat_messages.CardsTurnedOver)] == [
        ("player", (0, 2), clause), ("banker", (1, 3), clause)]
    collected = clause[:-1] + "1"  # 8.24.1, 8.33.1: the dealer collects the cards given back
    assert [(r.seat, r.clause) for r in of(events, baccarat_messages.CardsReturned)] == [(2, collected)]
    assert all(d.face_up for d in bac.fold(events, holding(procedure)).cards)


@pytest.mark.parametrize("procedure,clause", [("method_c", "000 8.24.3"), ("method_d", "000 8.33.3")])
def test_000_8_24_3_and_8_33_3_dealer_announces_players_count_then_bankers(procedure: str, clause: str) -> None:
    events = bac.decide(R, holding(procedure), baccarat_messages.ExposeHand(2, "banker"))
    assert [(c.hand, c.points, c.clause) for c in of(events, baccarat_messages.CountAnnounced)] == [
        ("player", 6, clause), ("banker", 8, clause)]


@pytest.mark.parametrize("procedure", ["method_c", "method_d"])
def test_000_8_21_and_8_30_marker_denotes_the_hand_the_holder_plays(procedure: str) -> None:
    rec = play_bac(R, NATURAL, procedure, wagers((2, "player", 5000)), Scripted({("shoe", 2): "player"}),
                   (supervisor("holder_plays_player"),))
    assert [(h.seat, h.plays) for h in of(rec.events, baccarat_messages.HolderAssigned)] == [(2, "player")]
    assert [(e.hand, e.seat) for e in of(rec.events, baccarat_messages.HandExposed)] == [("player", 2)]


# ---- Method D: 8.25 ---------------------------------------------------------


def test_000_8_25_shoe_offered_by_highest_wager_with_ties_to_the_lowest_numbered_seat() -> None:
    book = wagers((9, "banker", 5000), (2, "player", 5000), (12, "banker", 9000), (3, "tie", 90000), (6, "player", 2600))
    rec = play_bac(R, NATURAL, "method_d", book, Scripted({("shoe", 12): False}))
    order = of(rec.events, baccarat_messages.OfferOrder)[0]
    assert (order.seats, order.clause) == ((12, 2, 9, 6), "000 8.25")  # the tie wager does not count
    assert bac.fold(rec.events).shoe_holder == 2


def test_000_8_25_shoe_is_offered_afresh_at_the_commencement_of_each_coup() -> None:
    held = play_bac(R, NATURAL, "method_d", wagers((2, "banker", 5000)))
    assert bac.fold(held.events).shoe_holder == 2 and bac.shoe_holder_after(held.coup) is None
    s = opened("method_d", wagers((2, "banker", 5000), (9, "banker", 10000)))
    assert s.shoe_holder is None and s.asked == 9  # offered afresh: the highest wager first
