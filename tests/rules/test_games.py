"""The registry of games: every ruleset's game is in it, and nothing outside it
and the rules core names a game's rules (a game is added in one place)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from casino import games
from casino.config import rulesets
from casino.rules.errors import RuleViolation

ROOT = Path(__file__).resolve().parents[2]
# The code that deals, settles and verifies any game through the registry.
GAME_NEUTRAL = ["services/dealer_policy/service.py", "services/settlement/service.py",
                "shared/casino/audit/verify.py", "shared/casino/metrics.py"]


@pytest.mark.parametrize("name", rulesets.available())
def test_every_ruleset_is_for_a_game_of_the_registry(name: str) -> None:
    rules = rulesets.load(name)
    game = games.of(rules)
    assert isinstance(rules, game.rules_type)
    assert games.named(game.name) is game
    assert type(game.new()).__name__.lower().startswith(game.name)


def test_a_game_the_casino_does_not_deal_is_refused_naming_the_rule() -> None:
    with pytest.raises(RuleViolation) as refused:
        games.named("roulette")
    assert refused.value.clause == "ruleset"


@pytest.mark.parametrize("path", GAME_NEUTRAL)
def test_the_dealer_settlement_and_verification_name_no_game(path: str) -> None:
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    named = sorted({node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    if (node.module or "").startswith(("casino.rules.baccarat", "casino.rules.blackjack"))})
    assert named == [], f"{path} imports {named}: go through casino.games"

