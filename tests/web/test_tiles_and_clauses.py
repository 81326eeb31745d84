"""A tile's alerts and pace, and the regulations' text each recorded clause links to."""

from __future__ import annotations

from pathlib import Path

from services.web.clauses import Regulations, linked
from services.web.dispute import unnamed
from services.web.tiles import STALLED, Alert, Tile

from casino.cli.console import TableView
from casino.readmodels.projections import TableStatus, Takings

REGULATIONS = Path(__file__).resolve().parents[2] / "docs" / "regulations"


def _tile(**status: object) -> Tile:
    return Tile(TableView("BAC000-1"), TableStatus("BAC000-1", **status), Takings("BAC000-1"))  # type: ignore[arg-type]


def test_a_tile_alerts_a_held_coup_a_card_incident_a_failed_verification_and_a_table_stalled_mid_coup() -> None:
    now = 10_000.0
    assert _tile(phase="dealing", last_event_at=now - 5).alerts(now) == []
    held = _tile(phase="held", last_event_at=now)
    held.status.coup = "BAC000-1-000007"
    held.view.result, held.incident, held.incident_at = "HELD misdraw", "card misdrawn at coup 7: 5H", now - 3600
    held.incident_coup = 7
    # Each with when it was recorded and its coup: shown while the coup is held.
    assert held.alerts(now) == [Alert("coup held: HELD misdraw", now, 7), Alert("card misdrawn at coup 7: 5H", now - 3600, 7)]
    held.status.phase = "betting"
    assert held.alerts(now) == []  # ruled, and long ago
    failed = _tile(phase="finished", last_event_at=now - STALLED - 60)
    failed.finding, failed.finding_at, failed.finding_coup = "coup 12 failed verification", now - 1, 12
    assert [str(a) for a in failed.alerts(now)] == ["coup 12 failed verification", "no event for 6 min mid-coup"]
    assert failed.alerts(now)[0] == Alert("coup 12 failed verification", now - 1, 12)


def test_a_tiles_pace_is_coups_an_hour_over_the_last_quarter_hour_once_a_minute_is_seen() -> None:
    tile = _tile(coups=10)
    tile.counted(0.0)
    tile.status.coups = 11
    tile.counted(30.0)
    assert tile.pace is None  # half a minute: too soon to say
    tile.status.coups = 13
    tile.counted(120.0)
    assert tile.pace == 90.0  # 3 coups in 2 minutes


def test_each_cited_clause_links_to_its_text_as_the_regulation_words_it() -> None:
    r = Regulations(REGULATIONS)
    text_000 = (REGULATIONS / "000-baccarat-dealing-methods.txt").read_text(encoding="utf-8")
    assert r.text("000", "8.19") == text_000[text_000.index("8.19 "):text_000.index("8.20")].strip()
    assert "8.3.2 announce the point count" in (r.text("000", "8.3") or "")  # with its sub-clauses
    assert (r.text("002", "(9)") or "").startswith("(9) Where the cutting card is encountered")
    assert (r.text("003", "7.9") or "").startswith("7.9 Whenever the cutting card")
    assert r.text("000", "9.99") is None and r.text("004", "1") is None
    assert str(linked("000 8.19, 8.28 <b>")) == (
        '000 <a class="clause" href="/clause/000/8.19">8.19</a>, '
        '<a class="clause" href="/clause/000/8.28">8.28</a> &lt;b&gt;')


def test_a_face_down_card_is_named_in_no_step_yet_its_letters_inside_other_words_stay() -> None:
    """As of a step, a hole card's name (``TC``) is put as a face-down card
    wherever a step names it, never inside another word (the ``TC`` of ``UTC``);
    a card the record holds as nothing leaves the text as it is."""
    assert unnamed("card 5 of the shoe: TC drawn at 10:00 UTC", "TC") == \
        "card 5 of the shoe: a face-down card drawn at 10:00 UTC"
    assert unnamed("TC (card 5 of the shoe) to the dealer", "TC") == "a face-down card (card 5 of the shoe) to the dealer"
    assert unnamed("card 5 drawn", "") == "card 5 drawn"
    assert unnamed("a+b drawn", "a+b") == "a face-down card drawn"  # read leniently: no pattern in the record's text
