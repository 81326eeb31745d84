"""The baccarat third-card table and the payouts of every baccarat bet."""

from __future__ import annotations

import random

import msgspec
import pytest

from casino.rules import settlement
from casino.rules.baccarat import coup as bac
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.baccarat import tableau
from casino.rules.baccarat.messages import CoupResulted
from casino.rules.cards import full_set
from tests.rules.stacking import Scripted, baccarat, inspector, of, play_bac, stacked_shoe, wagers

# The Banker's drawing table as printed on punto banco layouts: for each Banker
# total, the values of Player's third card on which Banker draws ("-": Player stood).
BANKER_DRAWS_ON = {
    0: set(range(10)) | {"-"},
    1: set(range(10)) | {"-"},
    2: set(range(10)) | {"-"},
    3: {0, 1, 2, 3, 4, 5, 6, 7, 9} | {"-"},
    4: {2, 3, 4, 5, 6, 7} | {"-"},
    5: {4, 5, 6, 7} | {"-"},
    6: {6, 7},
    7: set(),
}
CARD_OF_VALUE = ["TS", "AS", "2S", "3S", "4S", "5S", "6S", "7S", "8S", "9S"]


def test_banker_draws_exactly_as_the_printed_table() -> None:
    for banker, draws_on in BANKER_DRAWS_ON.items():
        for third in ["-", *range(10)]:
            card = None if third == "-" else CARD_OF_VALUE[int(third)]
            assert tableau.banker_draws(banker, card) == (third in draws_on), (banker, third)


def test_player_draws_on_zero_to_five_and_stands_on_six_or_seven() -> None:
    assert [tableau.player_draws(p) for p in range(8)] == [True] * 6 + [False] * 2


def test_a_natural_eight_or_nine_stands_both_hands() -> None:
    for p, b in [("8S", "AS"), ("9S", "KS"), ("KS", "8S")]:
        player, banker = [p, "KH"], [b, "KD"]
        assert tableau.is_natural(player, banker)
        assert tableau.next_hand_to_draw(player, banker) is None


def test_the_deal_is_player_banker_player_banker_then_the_tableau() -> None:
    rec = play_bac(baccarat(), ["2S", "3H", "2D", "3C", "6H", "9D"], "method_a", wagers((1, "player", 5000)))
    assert [(d.hand, d.card) for d in of(rec.events, baccarat_messages.CardDealt)] == [
        ("player", "2S"), ("banker", "3H"), ("player", "2D"), ("banker", "3C"), ("player", "6H"), ("banker", "9D")]
    # Player 4 draws a six (0); Banker 6 draws against a six: 9 makes 5.
    assert rec.coup.result == CoupResulted("banker", 0, 5, False, True, True)  # both hands paired


def test_a_coups_cards_alone_tell_the_hands_and_whether_the_tableau_calls_for_another() -> None:
    """What the shoe works out when it draws a run by the tableau: from the
    coup's cards in the order drawn, the two hands, and whether another card is due."""
    rnd = random.Random(11)
    rules = baccarat()
    for _ in range(300):
        cards = list(full_set(1))
        rnd.shuffle(cards)
        rec = play_bac(rules, cards[:6], "method_a", wagers((1, "player", 5000)))
        drawn = [d.card for d in rec.coup.cards]
        assert tableau.hands(drawn) == (rec.coup.player, rec.coup.banker)
        assert [tableau.another_card(drawn[:k]) for k in range(len(drawn) + 1)] == [True] * len(drawn) + [False]
        with pytest.raises(ValueError, match="the tableau calls for no card"):
            tableau.hands(drawn + ["AS"])


@pytest.mark.parametrize("procedure,runs", [
    ("method_a", [True] * 6),  # nobody handles the cards: the whole deal is the tableau's
    ("method_b", [False] * 4 + [True] * 2),  # the hands are handled, then the third cards
    ("method_c", [False] * 4 + [True] * 2),
    ("method_d", [False] * 4 + [True] * 2),
])
def test_the_dealer_draws_by_the_tableau_alone_only_where_nobody_is_waited_for(procedure: str, runs: list[bool]) -> None:
    """``dealt_by_tableau`` at each card due; the property tests deal every
    procedure drawing such runs at once, and a card drawn where the coup waits
    for a player is refused ("no card is due")."""
    rules = baccarat()
    shoe = stacked_shoe(rules.shoe, ["2S", "3H", "2D", "3C", "6H", "9D"], document=rules.document)
    state, players = bac.BaccaratCoup(), Scripted()
    state = bac.step(rules, state, baccarat_messages.OpenCoup("c", procedure, (inspector(),)))[1]
    shoe.start_round("c")
    state = bac.step(rules, state, baccarat_messages.CloseBetting(wagers((1, "banker", 5000), (2, "player", 5000))))[1]
    seen = []
    while (w := bac.awaiting(state)).kind != "nothing":
        if w.kind == "card":
            seen.append(bac.dealt_by_tableau(state))
            card, position = shoe.draw("c")
            command: object = baccarat_messages.DealCard(card, position, w.seat)
        elif w.kind == "answer":
            command = players.answer(state, w)
        elif w.kind == "pass":
            command = baccarat_messages.PassCards(w.hand or "player")
        else:
            command = players.give_back(state, w)
        state = bac.step(rules, state, command)[1]  # type: ignore[arg-type]
    assert seen == runs


RESULT = CoupResulted("banker", 3, 7, False, True, False)


@pytest.mark.parametrize("rounding,returned", [("down", 2550 + 2422), ("half_up", 2550 + 2423), ("up", 2550 + 2423)])
def test_banker_wins_pay_even_money_less_commission_rounded_as_the_ruleset_says(rounding: str, returned: int) -> None:
    rules = baccarat(commission_rounding=rounding)
    [p] = settlement.settle_baccarat(rules, wagers((1, "banker", 2550)), RESULT)
    assert (p.returned, p.commission) == (returned, 2550 * 2 - returned)


def test_every_baccarat_bet_is_paid_by_its_odds() -> None:
    book = wagers((1, "banker", 10000), (2, "player", 10000), (3, "tie", 1000), (5, "player_pair", 1000),
                  (6, "banker_pair", 1000))
    pays = {p.bet: p.returned for p in settlement.settle_baccarat(baccarat(), book, RESULT)}
    assert pays == {"banker": 19500, "player": 0, "tie": 0, "player_pair": 12000, "banker_pair": 0}
    tie = msgspec.structs.replace(RESULT, winner="tie")
    pays = {p.bet: p.returned for p in settlement.settle_baccarat(baccarat(tie_pays=9), book, tie)}
    assert pays == {"banker": 10000, "player": 10000, "tie": 10000, "player_pair": 12000, "banker_pair": 0}


def test_the_ledger_settles_a_coup_once_and_keeps_the_house_net() -> None:
    payouts = settlement.settle_baccarat(baccarat(), wagers((1, "banker", 10000), (2, "player", 5000)), RESULT)
    ledger = settlement.Ledger()
    [event] = settlement.decide_settlement(ledger, settlement.SettleCoup("c1", payouts))
    ledger = settlement.evolve_ledger(ledger, event)
    assert (ledger.staked, ledger.returned, ledger.house_net) == (15000, 19500, -4500)
    with pytest.raises(settlement.RuleViolation):
        settlement.decide_settlement(ledger, settlement.SettleCoup("c1", payouts))


def test_a_baccarat_book_refuses_a_bet_the_table_does_not_offer() -> None:
    from casino.rules.baccarat import coup as bac
    from casino.rules.errors import RuleViolation

    styles = baccarat("baccarat-001-styles")  # no pair bets
    s = bac.fold(bac.decide(styles, bac.BaccaratCoup(), baccarat_messages.OpenCoup("c", "style_a")))
    with pytest.raises(RuleViolation) as err:
        bac.decide(styles, s, baccarat_messages.CloseBetting(wagers((1, "player_pair", 1000))))
    assert err.value.clause == "ruleset limits"
