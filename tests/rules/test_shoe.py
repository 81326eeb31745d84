"""The shoe: burn (002 (3)), cut card (002 (9), 003 7.8, 7.9), continuous shuffler, commitment."""

from __future__ import annotations

import pytest

from casino.rules import shoe as dealing_shoe
from casino.rules.cards import full_set
from casino.rules.errors import RuleViolation
from casino.rules.ruleset import ShoeRules
from tests.rules.stacking import order

ONE_DECK = ShoeRules(decks=1, penetration=0.1, burn="first_card")  # cut card before position 5


class Dealer:
    """Drives the shoe aggregate by hand, from a known order."""

    def __init__(self, rules: ShoeRules, cards: tuple[str, ...], salt: str = "s", document: str = "002") -> None:
        self.rules, self.cards, self.salt, self.document = rules, cards, salt, document
        self.state = dealing_shoe.ShoeState()
        self.events: list[dealing_shoe.AnyShoeEvent] = []

    def do(self, cmd: dealing_shoe.AnyShoeCommand) -> list[dealing_shoe.AnyShoeEvent]:
        evs = dealing_shoe.decide(self.rules, self.state, cmd, self.document)
        for e in evs:
            self.state = dealing_shoe.evolve(self.state, e)
        self.events += evs
        return evs

    def refused(self, cmd: dealing_shoe.AnyShoeCommand) -> RuleViolation:
        with pytest.raises(RuleViolation) as err:
            dealing_shoe.decide(self.rules, self.state, cmd, self.document)
        assert dealing_shoe.check(self.rules, self.state, cmd, self.document) is not None
        return err.value

    def shuffle(self, shoe_id: str = "shoe-1") -> None:
        self.do(dealing_shoe.Shuffle(shoe_id, dealing_shoe.commitment(self.cards, self.salt)))

    def next(self) -> str:
        return self.cards[self.state.position]

    def burn(self) -> None:
        while self.state.burns_due:
            self.do(dealing_shoe.Burn(self.next()))

    def draw(self, coup: str) -> list[dealing_shoe.AnyShoeEvent]:
        return self.do(dealing_shoe.Draw(coup, self.next()))


def fresh(rules: ShoeRules = ONE_DECK, cards: tuple[str, ...] | None = None, document: str = "002") -> Dealer:
    d = Dealer(rules, cards or order(rules.decks, []), document=document)
    d.shuffle()
    return d


def up_to_the_cut_card(first_of_round: str, document: str | None = None) -> Dealer:
    """A one-deck shoe whose first round (four cards) ends just before the cut
    card, of a 002 ruleset (``deal_round``) or a 003 one (``reshuffle_now``)."""
    rules = ShoeRules(decks=1, penetration=0.1, burn="first_card", cut_card_first_of_round=first_of_round)
    d = fresh(rules, document=document or ("002" if first_of_round == "deal_round" else "003"))
    d.burn()
    d.do(dealing_shoe.StartRound("c1"))
    for _ in range(4):
        d.draw("c1")
    return d


def test_002_3_first_card_after_each_shuffle_goes_to_the_discard_rack() -> None:
    d = fresh()
    assert d.refused(dealing_shoe.StartRound("c1")).clause == "002 (3)"
    first = d.next()
    d.burn()
    assert d.state.discard == [first] and d.state.position == 1
    d.do(dealing_shoe.StartRound("c1"))
    d.draw("c1")
    assert d.state.layout == [d.cards[1]]


def test_burn_by_first_card_value_burns_as_many_more_as_the_first_cards_value() -> None:
    rules = ShoeRules(decks=1, burn="by_first_card_value")
    for first, burned in (("5S", 6), ("KS", 11), ("AS", 2)):
        d = fresh(rules, order(1, [first]))
        d.burn()
        assert len(d.state.discard) == burned
        assert [e.face_up for e in d.events if isinstance(e, dealing_shoe.CardBurned)] == [True] + [False] * (burned - 1)


def test_002_9_cut_card_reached_during_a_round_finishes_the_round_then_reshuffles() -> None:
    d = up_to_the_cut_card("deal_round")
    evs = d.draw("c1")  # position 5: the cut card is encountered
    assert [type(e).__name__ for e in evs] == ["CutCardReached", "CardDrawn"]
    assert evs[0].clause == "002 (9)"  # type: ignore[union-attr]
    d.draw("c1")  # dealing continues until the round is completed
    assert d.refused(dealing_shoe.EndShoe(d.cards, d.salt)).clause == "002 (9)"
    evs = d.do(dealing_shoe.EndRound("c1", d.state.layout))
    assert [(e.when, e.clause) for e in evs if isinstance(e, dealing_shoe.ReshuffleRequired)] == [("after_round", "002 (9)")]
    assert d.refused(dealing_shoe.StartRound("c2")).clause == "002 (9)"
    d.do(dealing_shoe.EndShoe(d.cards, d.salt))
    d.shuffle("shoe-2")
    assert d.state.shoe_id == "shoe-2" and d.state.burns_due == 1


def test_003_7_8_cut_card_reached_during_a_round_the_round_is_completed_first() -> None:
    d = up_to_the_cut_card("reshuffle_now")
    evs = d.draw("c1")
    assert [(e.clause, e.first_of_round) for e in evs if isinstance(e, dealing_shoe.CutCardReached)] == [("003 7.8", False)]
    assert any(isinstance(e, dealing_shoe.CardDrawn) for e in evs)
    evs = d.do(dealing_shoe.EndRound("c1", d.state.layout))
    assert [e.clause for e in evs if isinstance(e, dealing_shoe.ReshuffleRequired)] == ["003 7.8"]


def test_003_7_9_cut_card_drawn_as_first_card_of_a_new_round_reshuffles_immediately() -> None:
    d = up_to_the_cut_card("reshuffle_now")
    d.do(dealing_shoe.EndRound("c1", d.state.layout))
    d.do(dealing_shoe.StartRound("c2"))
    evs = d.draw("c2")  # the first card of round c2 would be behind the cut card
    assert [type(e).__name__ for e in evs] == ["CutCardReached", "ReshuffleRequired"]
    assert not any(isinstance(e, dealing_shoe.CardDrawn) for e in evs)
    assert d.refused(dealing_shoe.Draw("c2", d.next())).clause == "003 7.9"
    d.do(dealing_shoe.EndShoe(d.cards, d.salt))  # immediately, with round c2 not yet dealt
    d.cards = order(1, ["KC", "9H"])
    d.shuffle("shoe-2")
    d.burn()
    evs = d.draw("c2")
    assert [e.card for e in evs if isinstance(e, dealing_shoe.CardDrawn)] == ["9H"]


def test_002_9_cut_card_first_of_a_round_under_002_deals_that_round_then_reshuffles() -> None:
    d = up_to_the_cut_card("deal_round")
    d.do(dealing_shoe.EndRound("c1", d.state.layout))
    d.do(dealing_shoe.StartRound("c2"))
    evs = d.draw("c2")
    assert [(e.first_of_round, e.clause) for e in evs if isinstance(e, dealing_shoe.CutCardReached)] == [(True, "002 (9)")]
    assert any(isinstance(e, dealing_shoe.CardDrawn) for e in evs)


def test_continuous_shuffler_returns_the_cards_after_each_coup_and_has_no_cut_card() -> None:
    rules = ShoeRules(decks=1, burn="none", shuffler="continuous_shuffler")
    d = fresh(rules)
    assert d.state.cut_index is None
    d.do(dealing_shoe.StartRound("c1"))
    for _ in range(6):
        d.draw("c1")
    evs = d.do(dealing_shoe.EndRound("c1", d.state.layout))
    assert [e.when for e in evs if isinstance(e, dealing_shoe.ReshuffleRequired)] == ["before_next_round"]
    assert len(d.state.returned) == 6 and not d.state.discard
    assert d.refused(dealing_shoe.StartRound("c2")).clause == "setting shoe.shuffler"


def test_commitment_is_checked_against_the_revealed_order_and_salt() -> None:
    d = fresh()
    d.burn()
    d.do(dealing_shoe.StartRound("c1"))
    d.draw("c1")
    d.do(dealing_shoe.EndRound("c1", d.state.layout))
    assert d.refused(dealing_shoe.EndShoe(d.cards, "other salt")).clause == "commitment"
    swapped = (d.cards[1], d.cards[0]) + d.cards[2:]
    assert d.refused(dealing_shoe.EndShoe(swapped, d.salt)).clause == "commitment"
    evs = d.do(dealing_shoe.EndShoe(d.cards, d.salt))
    assert isinstance(evs[0], dealing_shoe.ShoeEnded) and evs[0].order == d.cards


def test_commitment_refuses_a_shoe_whose_dealt_cards_differ_from_the_revealed_order() -> None:
    cards = order(1, [])
    d = Dealer(ONE_DECK, cards)
    d.shuffle()
    d.do(dealing_shoe.Burn(cards[0]))
    d.do(dealing_shoe.StartRound("c1"))
    d.do(dealing_shoe.Draw("c1", cards[5]))  # a card out of order: the shoe was not the committed one
    d.do(dealing_shoe.EndRound("c1", d.state.layout))
    assert "not the revealed order" in d.refused(dealing_shoe.EndShoe(cards, d.salt)).reason


def test_a_card_the_shoe_cannot_hold_is_refused() -> None:
    d = fresh()
    d.burn()
    d.do(dealing_shoe.StartRound("c1"))
    assert d.refused(dealing_shoe.Draw("c1", "ZZ")).clause == "shoe"
    d.do(dealing_shoe.Draw("c1", "2H"))
    assert "already been dealt" in d.refused(dealing_shoe.Draw("c1", "2H")).reason


def test_cards_picked_up_must_be_the_cards_on_the_layout() -> None:
    d = fresh()
    d.burn()
    d.do(dealing_shoe.StartRound("c1"))
    d.draw("c1")
    d.draw("c1")
    # The cards, not their order; refused as a fault the dealer-policy holds the coup for (docs/clauses.md).
    assert d.refused(dealing_shoe.EndRound("c1", d.state.layout[:1])).clause == dealing_shoe.ROUND


def test_a_whole_shoe_conserves_its_cards() -> None:
    rules = ShoeRules(decks=2, penetration=0.9, burn="first_card")
    d = fresh(rules, order(2, []))
    d.burn()
    rounds = 0
    while not d.state.reshuffle:
        d.do(dealing_shoe.StartRound(f"c{rounds}"))
        for _ in range(5):
            d.draw(f"c{rounds}")
        d.do(dealing_shoe.EndRound(f"c{rounds}", d.state.layout[::-1]))
        rounds += 1
        assert len(d.state.discard) + d.state.remaining == len(full_set(2))
    assert rounds > 10
    d.do(dealing_shoe.EndShoe(d.cards, d.salt))


@pytest.mark.parametrize("document", ["000", "001"])
def test_a_baccarat_shoes_cut_card_and_burns_cite_the_settings_that_decide_them(document: str) -> None:
    """Neither baccarat text speaks of a cut card or a burn: the ruleset's settings decide, and are cited."""
    d = up_to_the_cut_card("deal_round", document)
    cut = [e for e in d.draw("c1") if isinstance(e, dealing_shoe.CutCardReached)]
    assert [c.clause for c in cut] == ["setting shoe.penetration"]
    evs = d.do(dealing_shoe.EndRound("c1", d.state.layout))
    assert [e.clause for e in evs if isinstance(e, dealing_shoe.ReshuffleRequired)] == ["setting shoe.penetration"]
    first = up_to_the_cut_card("deal_round", document)
    first.do(dealing_shoe.EndRound("c1", first.state.layout))
    first.do(dealing_shoe.StartRound("c2"))
    assert [e.clause for e in first.draw("c2") if isinstance(e, dealing_shoe.CutCardReached)] == [
        "setting shoe.cut_card_first_of_round"]
    assert fresh(document=document).refused(dealing_shoe.StartRound("c1")).clause == "setting shoe.burn"
