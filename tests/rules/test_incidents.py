"""A card-reading table's incidents (casino.rules.incidents), setting by
setting and rule by rule: the house rule each incident is held for, the
rulings a supervisor may give and in which order, the card keyed in and
confirmed by another, a void that ends its coup for good, the coups voided
in a row across shoes, and the table closed (and reopened) when its shoe's
incidents pass what the ruleset allows."""

from __future__ import annotations

import pytest

from casino.rules import incidents
from casino.rules.errors import RuleViolation
from casino.rules.incidents import (
    CardIncident,
    CardKeyed,
    CoupRuled,
    Incidents,
    Key,
    Reopen,
    Report,
    Rule,
    TableClosed,
    TableReopened,
)
from casino.rules.ruleset import ShoeRules

T = "RD-1"
COUP = "RD-1-000004"
RULES = ShoeRules(decks=8)


def report(kind: str = "refused", read: str = "r1", coup: str = COUP, shoe: str = "RD-1-shoe-1", says: str = "",
           due: bool = False) -> Report:
    setting = {"misdrawn": RULES.misdraw, "refused": RULES.refused, "cut_card": RULES.cut_card}.get(kind, "")
    return Report(T, coup, kind, "" if kind == "unread" else "7H", read, "committed order", f"{kind} card", shoe,
                  says or setting, due)


def fold(state: Incidents, *commands: incidents.AnyIncidentCommand, rules: ShoeRules = RULES) -> Incidents:
    """The state after each command's events, decided in turn."""
    for command in commands:
        for event in incidents.decide(rules, state, command):
            state = incidents.evolve(state, event)
    return state


def refused(rules: ShoeRules, state: Incidents, command: incidents.AnyIncidentCommand) -> RuleViolation:
    violation = incidents.check(rules, state, command)
    assert violation is not None, command
    return violation


# ---- the house rule each incident is held for -------------------------------


@pytest.mark.parametrize(("misdraw", "held_for"), [("go_on", "go_on"), ("void", "void")])
def test_setting_shoe_misdraw_a_card_out_when_none_was_due_is_held_for_the_house_rule(misdraw: str,
                                                                                      held_for: str) -> None:
    rules = ShoeRules(decks=8, misdraw=misdraw)  # type: ignore[arg-type]
    [incident] = incidents.decide(rules, Incidents(), report("misdrawn", says=misdraw))
    assert isinstance(incident, CardIncident)
    assert (incident.setting, incident.house_rule) == ("shoe.misdraw", held_for)


@pytest.mark.parametrize("setting", ["go_on", "void", "end_shoe"])
def test_setting_shoe_refused_a_card_the_shoe_cannot_have_given_is_held_for_the_house_rule(setting: str) -> None:
    rules = ShoeRules(decks=8, refused=setting)  # type: ignore[arg-type]
    [incident] = incidents.decide(rules, Incidents(), report("refused", says=setting))
    assert isinstance(incident, CardIncident) and incident.house_rule == setting


@pytest.mark.parametrize("setting", ["go_on", "end_shoe"])
def test_setting_shoe_cut_card_a_cut_card_out_of_place_is_held_for_the_house_rule(setting: str) -> None:
    rules = ShoeRules(decks=8, cut_card=setting)  # type: ignore[arg-type]
    [incident] = incidents.decide(rules, Incidents(), report("cut_card", says=setting))
    assert isinstance(incident, CardIncident) and (incident.setting, incident.house_rule) == ("shoe.cut_card", setting)


def test_an_unread_card_is_held_to_be_keyed_in_and_confirmed_under_no_setting() -> None:
    [incident] = incidents.decide(RULES, Incidents(), report("unread"))
    assert isinstance(incident, CardIncident) and (incident.setting, incident.house_rule) == ("", "confirm")


def test_a_shoe_calling_for_another_ruling_than_the_setting_is_refused_naming_the_setting() -> None:
    violation = refused(RULES, Incidents(), report("misdrawn", says="void"))
    assert violation.clause == "setting shoe.misdraw" and "'go_on'" in violation.reason


def test_setting_shoe_end_shoe_after_cards_refused_in_a_row_are_held_for_end_shoe_whatever_the_setting() -> None:
    [incident] = incidents.decide(RULES, Incidents(), report("refused", says="end_shoe"))
    assert isinstance(incident, CardIncident) and incident.house_rule == "end_shoe"


def test_between_coups_no_coup_is_voided_a_void_house_rule_deals_on() -> None:
    [incident] = incidents.decide(RULES, Incidents(), report("refused", coup="", says="void"))
    assert isinstance(incident, CardIncident) and (incident.coup, incident.house_rule) == ("", "go_on")


def test_a_misdraw_is_only_a_card_out_when_none_was_due() -> None:
    violation = refused(RULES, Incidents(), report("misdrawn", due=True))
    assert "not a misdraw" in violation.reason
    held = fold(Incidents(), report("unread", read="r0"))  # a coup held for an incident: no card is due
    assert incidents.check(RULES, held, report("misdrawn", due=True)) is None


# ---- the coups voided in a row, across shoes --------------------------------


@pytest.mark.parametrize("after", [1, 2, 3])
def test_setting_shoe_end_shoe_after_the_coup_that_would_be_that_many_th_voided_in_a_row_ends_its_shoe(
        after: int) -> None:
    rules = ShoeRules(decks=8, end_shoe_after=after)
    state = Incidents()
    for n in range(after):
        state = incidents.opened(state, "S-1", incidents.carried(state, "S-1")[0], "")
        [incident] = incidents.decide(rules, state, report("refused", read=f"r{n}"))
        assert isinstance(incident, CardIncident)
        assert incident.house_rule == ("end_shoe" if n == after - 1 else "void"), n
        state = fold(state, report("refused", read=f"r{n}"), Rule(T, COUP, incident.house_rule, "S1"), rules=rules)
    assert state.void and state.to_end is not None and state.to_end.shoe == "RD-1-shoe-1"


def test_setting_shoe_end_shoe_after_voids_are_counted_across_shoes_and_the_next_closes_the_table() -> None:
    """Three coups void, the third ending shoe 1: the first coup on shoe 2
    names three voids before it, and a fourth void in a row is no void: the
    table closes, with the coup in play (held for compliance by the dealer)."""
    state = Incidents()
    for n in range(3):
        state = incidents.opened(state, "S-1", incidents.carried(state, "S-1")[0], "")
        state = fold(state, report("refused", read=f"r{n}", shoe="S-1"),
                     Rule(T, COUP, "end_shoe" if n == 2 else "void", "S1"))
    voids, ruled_ended = incidents.carried(state, "S-2")
    assert (voids, ruled_ended) == (3, "S-1")
    state = incidents.opened(state, "S-2", voids, ruled_ended)
    events = incidents.decide(RULES, state, report("refused", read="r4", shoe="S-2"))
    assert [type(e) for e in events] == [CardIncident, TableClosed]
    closed = events[1]
    assert isinstance(closed, TableClosed)
    assert (closed.coup, closed.shoe, closed.clause, closed.ruled_ended) == (COUP, "S-2", "setting shoe.end_shoe_after",
                                                                            "S-1")
    assert not any(isinstance(e, CoupRuled) for e in events)  # nothing voided


def test_a_coup_dealt_to_its_end_or_a_reopening_counts_the_voids_in_a_row_from_none() -> None:
    void = fold(incidents.opened(Incidents(), "S-1", 1, ""), report("refused"), Rule(T, COUP, "void", "S1"))
    assert incidents.carried(void, "S-1") == (2, "")
    dealt = incidents.opened(void, "S-1", 2, "")
    assert incidents.carried(dealt, "S-1") == (0, "")


# ---- a shoe a ruling ended, and the shoe after it ---------------------------


def test_the_shoe_after_one_a_ruling_ended_closes_the_table_where_it_must_be_ended_too() -> None:
    """Shoe 1 ended by a ruling between coups (three cards refused in a row):
    shoe 2's burn cards refused three times in a row close the table instead
    of ending a second shoe; once shoe 2 has ended otherwise, shoe 3 may be
    ended by a ruling as any shoe."""
    state = fold(Incidents(), report("refused", coup="", shoe="S-1", says="end_shoe"), Rule(T, "", "end_shoe", "S1"))
    assert (state.ended, state.to_end and state.to_end.shoe) == ("S-1", "S-1")
    again = incidents.decide(RULES, state, report("refused", coup="", read="r2", shoe="S-2", says="end_shoe"))
    assert [type(e) for e in again] == [CardIncident, TableClosed]
    assert isinstance(again[1], TableClosed) and again[1].coup == ""
    # Shoe 2 dealt and ended without a ruling: shoe 3 is watched no more.
    later = incidents.opened(incidents.seen(state, "S-2"), "S-2", 0, "S-1")
    assert incidents.carried(later, "S-3") == (0, "")
    third = incidents.seen(later, "S-3")
    assert [type(e) for e in incidents.decide(RULES, third, report("refused", coup="", read="r3", shoe="S-3",
                                                                    says="end_shoe"))] == [CardIncident]


def test_a_card_of_the_shoe_a_ruling_ended_already_closes_nothing() -> None:
    state = fold(Incidents(), report("refused", coup="", read="r1", shoe="S-1", says="end_shoe"),
                 report("refused", coup="", read="r2", shoe="S-1", says="end_shoe"), Rule(T, "", "end_shoe", "S1"))
    assert [type(e) for e in incidents.decide(RULES, state, report("refused", coup="", read="r3", shoe="S-1",
                                                                    says="end_shoe"))] == [CardIncident]


# ---- too many incidents awaiting a ruling -----------------------------------


@pytest.mark.parametrize("most", [1, 10])
def test_setting_shoe_most_awaiting_the_card_that_would_be_one_more_closes_the_table(most: int) -> None:
    rules = ShoeRules(decks=8, most_awaiting=most)
    state = fold(Incidents(), *[report("misdrawn", coup="", read=f"r{n}") for n in range(most)], rules=rules)
    assert len(state.awaiting) == most and not state.closed
    events = incidents.decide(rules, state, report("misdrawn", coup="", read="flood"))
    assert [type(e) for e in events] == [CardIncident, TableClosed]
    closed = events[1]
    assert isinstance(closed, TableClosed) and (closed.clause, closed.awaiting) == ("setting shoe.most_awaiting",
                                                                                    most + 1)
    after = fold(state, report("misdrawn", coup="", read="flood"), rules=rules)
    assert after.closed == closed.reason and after.awaiting == () and after.to_end is not None


def test_ruleset_most_awaiting_is_bounded() -> None:
    with pytest.raises(Exception, match="most_awaiting"):
        ShoeRules(decks=8, most_awaiting=0)


# ---- a closed table ---------------------------------------------------------


def test_a_closed_table_takes_no_report_key_or_ruling_until_a_supervisor_reopens_it() -> None:
    state = incidents.evolve(fold(Incidents(), report("unread", coup="")),
                             TableClosed(T, "", "S-1", "flooded", "setting shoe.most_awaiting", 1))
    for command in (report("misdrawn", coup="", read="r9"), Key(T, "", "7H", "D1"), Rule(T, "", "go_on", "S1")):
        assert refused(RULES, state, command).clause == incidents.CLOSED, command
    with pytest.raises(RuleViolation, match="counted, not taken"):
        incidents.reports_taken(state, T)
    assert refused(RULES, state, Reopen(T, "")).clause == incidents.CLOSED  # a supervisor, named
    [reopened] = incidents.decide(RULES, state, Reopen(T, "S1", 7))
    assert reopened == TableReopened(T, "S1", 7)
    after = incidents.evolve(state, reopened)
    assert not after.closed and after.awaiting == () and incidents.carried(after, "S-2") == (0, "")
    assert refused(RULES, after, Reopen(T, "S1")).clause == incidents.CLOSED  # not closed now


# ---- rulings ---------------------------------------------------------------


def test_a_ruling_is_on_the_first_incident_awaiting_one_each_in_turn() -> None:
    assert refused(RULES, Incidents(), Rule(T, COUP, "go_on", "S1")).clause == incidents.IN_TURN
    state = fold(Incidents(), report("misdrawn", read="first"), report("refused", read="second"))
    out_of_turn = refused(RULES, state, Rule(T, COUP, "void", "S1", read="second"))
    assert out_of_turn.clause == incidents.IN_TURN and "each incident is ruled in turn" in out_of_turn.reason
    [ruled] = incidents.decide(RULES, state, Rule(T, COUP, "go_on", "S1", read="first"))
    assert ruled == CoupRuled(T, COUP, "first", "go_on", "S1", "shoe.misdraw")
    assert incidents.evolve(state, ruled).first == state.awaiting[1]


def test_a_ruling_names_its_supervisor() -> None:
    state = fold(Incidents(), report("misdrawn"))
    assert refused(RULES, state, Rule(T, COUP, "go_on", "")).clause == incidents.IN_TURN


def test_a_ruling_other_than_the_house_rule_is_refused_naming_the_setting_and_the_rulings_it_takes_once() -> None:
    state = fold(Incidents(), report("refused"))  # the house rule voids: the setting's void, or end_shoe
    wrong = refused(RULES, state, Rule(T, COUP, "go_on", "S1"))
    assert wrong.clause == "setting shoe.refused"
    assert "'void' or 'end_shoe'" in wrong.reason and wrong.reason.count("'end_shoe'") == 1, wrong.reason
    ending = fold(Incidents(), report("refused", says="end_shoe"))  # held for end_shoe: that alone
    assert refused(RULES, ending, Rule(T, COUP, "void", "S1")).reason.count("'end_shoe'") == 1
    misdraw = refused(RULES, fold(Incidents(), report("misdrawn")), Rule(T, COUP, "end_shoe", "S1"))
    assert misdraw.clause == "setting shoe.misdraw" and "'go_on'" in misdraw.reason


@pytest.mark.parametrize("kind", ["refused", "cut_card"])
def test_a_shoe_that_has_left_its_order_may_always_be_ended(kind: str) -> None:
    state = fold(Incidents(), report(kind))
    assert incidents.check(RULES, state, Rule(T, COUP, "end_shoe", "S1")) is None


def test_a_ruled_void_ends_its_coup_for_good_whatever_is_queued_behind_it() -> None:
    state = fold(Incidents(), report("refused", read="first"), report("misdrawn", read="second"),
                 Rule(T, COUP, "void", "S1"), Rule(T, COUP, "go_on", "S1"))
    assert state.void and state.awaiting == () and not state.holding


@pytest.mark.parametrize("coup", [COUP, ""])
@pytest.mark.parametrize("kind", ["misdrawn", "refused", "cut_card"])
def test_every_incident_has_a_ruling_a_supervisor_may_give(kind: str, coup: str) -> None:
    state = fold(Incidents(), report(kind, coup=coup))
    assert state.first is not None
    rulings = incidents.allowed(state.first)
    assert rulings and all(incidents.check(RULES, state, Rule(T, coup, r, "S1")) is None for r in rulings), rulings


# ---- a card the shoe could not read -----------------------------------------


def test_an_unread_card_is_keyed_in_by_the_dealer_on_duty_who_is_named() -> None:
    state = fold(Incidents(), report("unread", read="u1"))
    nobody = refused(RULES, state, Key(T, COUP, "7H", ""))
    assert nobody.clause == incidents.UNREAD and "no dealer is signed in" in nobody.reason
    [keyed] = incidents.decide(RULES, state, Key(T, COUP, "7H", "D1"))
    assert keyed == CardKeyed(T, COUP, "u1", "7H", "D1")
    misdrawn = fold(Incidents(), report("misdrawn"))
    assert refused(RULES, misdrawn, Key(T, COUP, "7H", "D1")).clause == incidents.UNREAD


def test_a_card_keyed_in_is_confirmed_by_another_as_keyed_and_only_then() -> None:
    state = fold(Incidents(), report("unread", read="u1"))
    assert refused(RULES, state, Rule(T, COUP, "confirm", "S1", card="7H")).clause == incidents.UNREAD  # not keyed
    assert refused(RULES, state, Rule(T, COUP, "void", "S1")).clause == incidents.UNREAD  # confirmed, or nothing
    keyed = fold(state, Key(T, COUP, "7H", "S1"))
    assert refused(RULES, keyed, Rule(T, COUP, "confirm", "S2", card="8H")).clause == incidents.UNREAD
    by_keyer = refused(RULES, keyed, Rule(T, COUP, "confirm", "S1", card="7H"))
    assert "another confirms it" in by_keyer.reason
    assert fold(keyed, Rule(T, COUP, "confirm", "S2", card="7H")).awaiting == ()


def test_a_card_keyed_in_is_for_the_first_incident_and_forgotten_once_it_is_ruled() -> None:
    state = fold(Incidents(), report("unread", read="u1"), Key(T, COUP, "7H", "D1"))
    assert (state.keyed, state.keyer) == ("7H", "D1")
    behind = fold(state, report("misdrawn", read="m2"))
    assert behind.keyed == "7H"  # a second incident keeps the first's card
    ruled = fold(behind, Rule(T, COUP, "confirm", "S1", card="7H"))
    assert (ruled.keyed, ruled.keyer) == ("", "")


def test_an_opening_clears_the_coup_before_and_records_what_the_table_carries() -> None:
    state = fold(incidents.opened(Incidents(), "S-1", 0, ""), report("refused"), Rule(T, COUP, "end_shoe", "S1"))
    assert state.void and state.to_end is not None
    nxt = incidents.opened(state, "S-2", *incidents.carried(state, "S-2"))
    assert (nxt.void, nxt.to_end, nxt.voids, nxt.ended, nxt.after) == (False, None, 1, "RD-1-shoe-1", "S-2")


def test_a_reopening_counts_the_voids_in_a_row_afresh_and_leaves_the_coup_before_void() -> None:
    """A void coup, then the table closed between coups and reopened: the
    coup before stays void (nothing more is dealt in it), and the next coup
    names no void before it."""
    state = fold(incidents.opened(Incidents(), "S-1", 1, ""), report("refused"), Rule(T, COUP, "void", "S1"))
    assert incidents.carried(state, "S-1") == (2, "")
    closed = incidents.evolve(state, TableClosed(T, "", "S-1", "flooded", "setting shoe.most_awaiting", 11))
    reopened = fold(closed, Reopen(T, "S1", 4))
    assert reopened.void and not reopened.closed and incidents.carried(reopened, "S-2") == (0, "")
