"""Rulesets as data (validated, refused with the field named) and seat geometry."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from casino.config import rulesets
from casino.rules.errors import RuleViolation
from casino.rules.ruleset import BaccaratRules, BlackjackRules, RulesetError
from casino.rules.table import Table
from tests.variants import ruleset_variant

GOOD = rulesets.BUILT_IN / "blackjack-002-hole-card.toml"


def test_one_built_in_ruleset_per_seed_document() -> None:
    loaded = {name: rulesets.load(name) for name in rulesets.available()}
    assert {r.document for r in loaded.values()} == {"000", "001", "002", "003"}
    assert isinstance(loaded["baccarat-000-methods"], BaccaratRules)
    assert isinstance(loaded["blackjack-003-no-hole-card"], BlackjackRules)


@pytest.mark.parametrize(
    "change,field",
    [
        (("decks = 6", "decks = 9"), "decks"),
        (("decks = 6", 'decks = "six"'), "$.shoe.decks"),
        (("max_hands = 4", "max_hands = 0"), "max_hands"),
        (("hole_card = true ", "hole_kard = true "), "hole_kard"),
        (('pickup = "dealer_first"', 'pickup = "whenever"'), "$.pickup"),
        (("box = { min = 1000, max = 500000 }", "box = { min = 1000, max = 10 }"), "min"),
        (("seats = [1, 2, 3, 4, 5, 6, 7]", "seats = [1, 1, 2]"), "seats"),
    ],
)
def test_a_bad_ruleset_file_is_refused_with_a_message_naming_the_field(
    tmp_path: object, change: tuple[str, str], field: str
) -> None:
    text = GOOD.read_text()
    assert change[0] in text
    path = tmp_path / "bad.toml"  # type: ignore[operator]
    path.write_text(text.replace(change[0], change[1]))
    with pytest.raises(RulesetError) as err:
        rulesets.load(str(path))
    assert field in str(err.value)


@pytest.mark.parametrize("decks,penetration,first_of_round,refused", [
    (1, 0.95, "deal_round", True),  # 3 cards behind the cut card
    (1, 0.90, "deal_round", True),  # 5
    (1, 0.90, "reshuffle_now", False),  # 5: the cut card out first reshuffles at once
    (1, 0.92, "reshuffle_now", True),  # 4
    (1, 0.88, "deal_round", False),  # 6
    (8, 0.95, "deal_round", False),  # 21
])
def test_a_baccarat_ruleset_whose_cut_card_leaves_too_few_cards_for_a_coup_is_refused(
        tmp_path: Path, decks: int, penetration: float, first_of_round: str, refused: bool) -> None:
    path = ruleset_variant(tmp_path, "baccarat-000-methods", decks=decks, penetration=penetration,
                           cut_card_first_of_round=first_of_round)
    if not refused:
        assert isinstance(rulesets.load(path), BaccaratRules)
        return
    with pytest.raises(RulesetError) as err:
        rulesets.load(path)
    assert "penetration" in str(err.value) and "behind the cut card" in str(err.value)


def test_an_unknown_ruleset_name_lists_the_built_in_ones() -> None:
    with pytest.raises(RulesetError) as err:
        rulesets.load("punto-banco-99")
    assert "baccarat-000-methods" in str(err.value)


def test_methods_and_styles_do_not_mix_in_one_ruleset(tmp_path: object) -> None:
    text = (rulesets.BUILT_IN / "baccarat-001-styles.toml").read_text()
    path = tmp_path / "mixed.toml"  # type: ignore[operator]
    path.write_text(text.replace('procedures = ["style_a", "style_b"]', 'procedures = ["style_a", "method_b"]'))
    with pytest.raises(RulesetError) as err:
        rulesets.load(str(path))
    assert "procedures" in str(err.value)


# Seats listed from the dealer's left to the dealer's right; numbers skip 4 and 13.
T = Table((14, 12, 11, 10, 9, 8, 7, 6, 5, 3, 2, 1))


def test_clockwise_runs_from_the_dealers_left_to_right_and_counter_clockwise_back() -> None:
    assert T.clockwise({1, 5, 12}) == [12, 5, 1]
    assert T.counter_clockwise({1, 5, 12}) == [1, 5, 12]


def test_nearest_the_dealers_right_is_not_the_lowest_numbered_seat_in_general() -> None:
    left_numbered = Table((1, 2, 3, 5, 6, 7))  # seat 1 at the dealer's left
    assert left_numbered.nearest_dealers_right({1, 3, 6}) == 6
    assert left_numbered.lowest_numbered({1, 3, 6}) == 1
    assert T.nearest_dealers_right({3, 10}) == 3


def test_counter_clockwise_from_a_seat_wraps_past_the_dealer() -> None:
    left_numbered = Table((1, 2, 3, 5, 6, 7))
    assert left_numbered.counter_clockwise_from(3, {1, 3, 6, 7}) == [3, 1, 7, 6]


def test_a_seat_that_does_not_exist_is_refused() -> None:
    with pytest.raises(RuleViolation) as err:
        T.check_seat(4)
    assert err.value.clause == "ruleset seats"
    with pytest.raises(ValueError):
        Table((1, 1))


def test_a_ruleset_file_that_changes_is_read_again(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "table.toml"  # type: ignore[operator]
    path.write_text(GOOD.read_text())
    first = rulesets.load(str(path))
    assert isinstance(first, BlackjackRules) and first.shoe.decks == 6
    path.write_text(GOOD.read_text().replace("decks = 6", "decks = 8"))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    later = rulesets.monotonic() + rulesets.RECHECK_S
    monkeypatch.setattr(rulesets, "monotonic", lambda: later)  # looked at again a second later
    again = rulesets.load(str(path))
    assert isinstance(again, BlackjackRules) and again.shoe.decks == 8


def test_003_7_9_a_003_ruleset_reshuffles_at_once_when_the_cut_card_comes_first_in_a_round(tmp_path: Path) -> None:
    assert isinstance(rulesets.load(ruleset_variant(tmp_path, "blackjack-002-hole-card",
                                                    cut_card_first_of_round="reshuffle_now")), BlackjackRules)
    with pytest.raises(RulesetError) as err:
        rulesets.load(ruleset_variant(tmp_path, "blackjack-003-no-hole-card", cut_card_first_of_round="deal_round"))
    assert "cut_card_first_of_round" in str(err.value) and "7.9" in str(err.value)
