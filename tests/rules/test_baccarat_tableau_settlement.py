"""The baccarat third-card table and the payouts of every baccarat bet."""

from __future__ import annotations

import msgspec
import pytest

from casino.rules import settlement
from casino.rules.baccarat import messages as bm
from casino.rules.baccarat import tableau
from casino.rules.baccarat.messages import CoupResulted
from tests.rules.stacking import baccarat, of, play_bac, wagers

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
    assert [(d.hand, d.card) for d in of(rec.events, bm.CardDealt)] == [
        ("player", "2S"), ("banker", "3H"), ("player", "2D"), ("banker", "3C"), ("player", "6H"), ("banker", "9D")]
    # Player 4 draws a six (0); Banker 6 draws against a six: 9 makes 5.
    assert rec.coup.result == CoupResulted("banker", 0, 5, False, True, True)  # both hands paired


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
    s = bac.fold(bac.decide(styles, bac.BaccaratCoup(), bm.OpenCoup("c", "style_a")))
    with pytest.raises(RuleViolation) as err:
        bac.decide(styles, s, bm.CloseBetting(wagers((1, "player_pair", 1000))))
    assert err.value.clause == "ruleset limits"
