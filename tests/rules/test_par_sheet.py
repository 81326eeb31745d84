"""Par sheets by exact enumeration through the library's own rules, against published figures."""

from __future__ import annotations

import json
import subprocess
import sys

import msgspec
import pytest

from casino.rules import parsheet
from tests.rules.stacking import baccarat, blackjack


@pytest.mark.parametrize(
    "decks,banker,player,tie",
    [(8, 0.458597, 0.446247, 0.095156), (6, 0.458653, 0.446279, 0.095069)],
)
def test_baccarat_outcomes_match_the_published_figures(decks: int, banker: float, player: float, tie: float) -> None:
    o = parsheet.baccarat_outcomes(decks)
    assert sum(o.values()) == 1
    assert (round(float(o["banker"]), 6), round(float(o["player"]), 6), round(float(o["tie"]), 6)) == (
        banker, player, tie)


def test_baccarat_house_edge_at_eight_decks_and_point_nine_five_to_one() -> None:
    sheet = parsheet.baccarat_sheet(baccarat(shoe=msgspec.structs.replace(baccarat().shoe, decks=8)))
    assert round(100 * sheet["house_edge"]["banker"], 4) == 1.0579
    assert round(100 * sheet["house_edge"]["player"], 4) == 1.2351
    assert set(sheet["house_edge"]) == {"banker", "player", "tie", "player_pair", "banker_pair"}


def test_blackjack_dealer_finals_at_eight_decks_standing_on_soft_17() -> None:
    assert blackjack("blackjack-003-no-hole-card").shoe.decks == 8
    six = parsheet.dealer_final(8, 6, hits_soft_17=False)
    ten = parsheet.dealer_final(8, 10, hits_soft_17=False)
    assert round(float(six["bust"]), 6) == 0.422922
    assert round(float(ten["bust"]), 6) == 0.212381
    assert round(float(ten["blackjack"]), 6) == 0.077108
    for up in range(1, 11):
        assert sum(parsheet.dealer_final(8, up, False).values()) == 1


def test_hitting_soft_17_leaves_fewer_dealer_seventeens() -> None:
    stand = parsheet.dealer_final(6, 7 - 1, hits_soft_17=False)
    hit = parsheet.dealer_final(6, 7 - 1, hits_soft_17=True)
    assert hit["17"] < stand["17"] and hit["bust"] > stand["bust"]


def test_the_casino_command_prints_the_par_sheet_as_json() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "casino.cli.main", "par-sheet", "blackjack-003-no-hole-card", "--json"],
        capture_output=True, text=True, check=True,
    )
    sheet = json.loads(out.stdout)
    assert (sheet["game"], sheet["decks"], sheet["dealer_hits_soft_17"]) == ("blackjack", 8, False)
    assert list(sheet["dealer_final"]) == ["A", "2", "3", "4", "5", "6", "7", "8", "9", "10"]
    assert list(sheet["dealer_final"]["6"]) == ["17", "18", "19", "20", "21", "blackjack", "bust"]
    assert round(sheet["dealer_final"]["6"]["bust"], 6) == 0.422922


def test_the_casino_command_refuses_an_unknown_ruleset() -> None:
    out = subprocess.run([sys.executable, "-m", "casino.cli.main", "par-sheet", "no-such-game"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "no ruleset" in out.stderr


def test_the_casino_command_stops_quietly_when_its_reader_stops_reading() -> None:
    """``casino replay coup ... | head``: the pipe is closed before anything is written."""
    proc = subprocess.Popen([sys.executable, "-m", "casino.cli.main", "par-sheet", "baccarat-000-methods"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    errors = proc.stderr.read()
    assert proc.wait(timeout=60) == 141 and errors == ""
