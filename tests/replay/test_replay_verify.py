"""Replay and verification on a store the simulated casino wrote: every coup
replays and verifies; a tampered copy of a coup (a card, a payout, a shoe's
order) is caught with the sequence number of the changed event; an event
written under an older schema version still replays and verifies."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import nats
import pytest
from services import runner
from services.projections import service as projections_service

from casino.audit.audits import Report, verify_history, verify_store
from casino.audit.history import by_coup
from casino.audit.picture import render_svg
from casino.audit.replay import SCHEMA, render_text, replay_coup
from casino.audit.verify import verify_coup, verify_shoes
from casino.cli.replay import coup_text, rebuild_projections
from casino.cli.run import default_tables
from casino.cli.simulator import Simulator
from casino.readmodels import projections
from casino.readmodels.projections import KvProjections, Projector
from casino.rules import settlement, shoe
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.blackjack import messages as blackjack_messages
from casino.rules.cards import full_set
from casino.store import envelope, subjects
from casino.store.eventstore import Stored
from casino.store.jetstream import STREAM, JetStreamEventStore, ensure_streams
from tests.natsfixture import nats_server
from tests.variants import ruleset_variant

pytestmark = pytest.mark.anyio
def small_shoe(tmp: Path) -> str:
    """Blackjack 002 from a one-deck shoe cut at half: shoes end every round or two."""
    return ruleset_variant(tmp, "blackjack-002-hole-card", decks=1, penetration=0.5)


class Recorded(list[Stored]):
    """The messages of the store, the live read models when the run ended, and
    the shoes the projections service still held in memory."""

    live: dict[tuple[str, str], bytes]
    held_shoes: set[str]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    """Every message of a store where four simulated tables dealt 12 coups each,
    with the projections service keeping the read models live."""
    import anyio

    tables = default_tables(4, ["baccarat-000-methods", "baccarat-001-styles",
                                small_shoe(tmp_path_factory.mktemp("rulesets")), "blackjack-003-no-hole-card"])

    shuffles: dict[str, int] = {}

    def seeded(table: str, decks: int) -> tuple[tuple[str, ...], str]:
        """Each table's shoes shuffled the same at every run: the deal is the same, not one that may or may not
        hold the case a test looks for (a Method C holder keeping the shoe into the next coup)."""
        shuffles[table] = n = shuffles.get(table, 0) + 1
        cards = list(full_set(decks))
        random.Random(f"{table}-{n}").shuffle(cards)
        return tuple(cards), f"salt-{table}-{n}"

    async def deal(url: str) -> Recorded:
        running = [await runner.start(kind, url, tables=tables, shuffle=seeded)
                   for kind in (*runner.KINDS, "projections")]
        nc = await nats.connect(url)
        try:
            await Simulator(nc, tables, seed=11).run(12)
            # The last coups' rounds end at the shoe after the terminals have their results: recorded first.
            await running[runner.KINDS.index("dealer-policy")].service.finish_rounds()
            out = Recorded(await JetStreamEventStore(nc).read(f"{subjects.EVENTS}.>"))
            kv = await KvProjections(nc.jetstream()).open()
            while await kv.seq() < out[-1].seq:
                await anyio.sleep(0.05)
            projector = Projector()
            projector.fold(out)
            out.live = {k: v for k, v in (await kv.values(projector.everything())).items() if v is not None}
            out.held_shoes = set(running[-1].service.shoe_stats)
            return out
        finally:
            await nc.close()
            for r in reversed(running):
                await r.stop()

    with nats_server(tmp_path_factory.mktemp("nats")) as url:
        yield anyio.run(deal, url)


def copy(stored: list[Stored]) -> list[Stored]:
    """A copy through the wire format, as another store would hold it."""
    return [Stored(m.seq, m.subject, envelope.decode(envelope.encode(m.batch)), m.msg_id) for m in stored]


def test_every_coup_of_the_simulated_casino_replays_and_verifies(recorded: list[Stored]) -> None:
    coups = by_coup(recorded)
    assert len(coups) == 48
    report = verify_history(recorded)
    assert (report.coups, report.findings) == (48, [])
    for msgs in coups.values():
        r = replay_coup(msgs)
        assert r.settled and r.cards and r.announcements and r.pickup and r.payouts
        assert sorted(c.card for c in r.cards) == sorted(r.pickup)


def test_a_baccarat_replay_reads_like_the_rulebook(recorded: list[Stored]) -> None:
    coups = [replay_coup(m) for m in by_coup(recorded).values()]
    shoe_coup = next(r for r in coups if r.procedure in ("method_c", "method_d") and any(
        h.startswith("shoe: seat") for h in r.holders))
    text = render_text(shoe_coup)
    assert f"Dealt by {shoe_coup.procedure.replace('_', ' ')} (000 8." in text
    assert "offered to seat" in text and "announced: player" in text and "Payouts:" in text
    assert all(c.dealt_by.startswith("seat") and not c.face_up for c in shoe_coup.cards[:4])
    data = json.loads(msgspec.json.encode(shoe_coup))
    assert data["schema"] == SCHEMA and [s["seq"] for s in data["steps"]] == sorted(s["seq"] for s in data["steps"])
    svg = render_svg(shoe_coup)
    assert svg.startswith("<svg") and "SHOE" in svg and shoe_coup.table in svg


def test_text_a_record_holds_is_shown_escaped_never_acted_on(recorded: list[Stored]) -> None:
    """A record written before terminals' text was validated (or forged) may
    hold an escape sequence that clears the screen and draws a false verdict,
    or a bidirectional override: `casino replay` shows each as an escape."""
    forged = "\x1b[2J\x1b[HVERIFIED OK\u202e"
    coup = next(ms for ms in by_coup(recorded).values() if replay_coup(ms).game == "baccarat")
    tampered, _ = _tamper(coup, baccarat_messages.CoupOpened, lambda e: msgspec.structs.replace(
        e, approvals=(baccarat_messages.Approval("method_b", "inspector", forged),)))
    r = replay_coup(tampered)
    for as_json, shown in ((False, "\\x1b[2J\\x1b[HVERIFIED OK\\u202e"), (True, "\\u001b[2J\\u001b[HVERIFIED OK\\u202e")):
        text = coup_text(r, as_json)
        assert "\x1b" not in text and "\u202e" not in text, as_json
        assert shown in text, as_json
    assert "\x1b" not in render_svg(r)


def test_verify_decides_the_shoe_holder_from_the_coup_before_not_from_the_opening(recorded: list[Stored]) -> None:
    """000 8.18: a holder who passed the shoe does not deal the next coup. A
    pass recorded on the coup before (as a second instance of the dealer-policy
    could write it while another opened the next coup) leaves nobody holding:
    the next coup opened with the shoe still held by that seat is a finding,
    though the coup is consistent in itself."""
    coups = by_coup(recorded)
    kept = next((n, c) for n, c in sorted(coups.items()) for nxt in [coups.get(f"{n[:-6]}{int(n[-6:]) + 1:06d}")]
                if nxt is not None and any(isinstance(e.data, baccarat_messages.CoupOpened)
                                           and e.data.shoe_holder is not None for m in nxt for e in m.batch.events))
    assert verify_history(recorded).findings == []
    coup, msgs = kept
    last = max((m for m in msgs if m.subject.endswith(".coup")), key=lambda m: m.seq)
    holder = next(e.data.shoe_holder for m in coups[f"{coup[:-6]}{int(coup[-6:]) + 1:06d}"] for e in m.batch.events
                  if isinstance(e.data, baccarat_messages.CoupOpened))
    passed = msgspec.structs.replace(last.batch.events[-1], type="baccarat.shoe_given_up",
                                     data=baccarat_messages.ShoeGivenUp(holder, "passed", "000 8.18"))
    tampered = [Stored(m.seq, m.subject, envelope.Batch((*m.batch.events, passed)), m.msg_id) if m is last else m
                for m in recorded]
    findings = verify_history(tampered).findings
    assert [f.coup for f in findings] == [f"{coup[:-6]}{int(coup[-6:]) + 1:06d}"], findings
    assert f"held by seat {holder}" in findings[0].what and "left it with nobody" in findings[0].what


def test_verify_holds_a_change_of_procedure_to_the_supervisor_who_directed_it(recorded: list[Stored]) -> None:
    """000 8.2, 001 8.5: a coup dealt by another procedure than the one in
    force names the supervisor who directed it, and the procedure in force
    is the one the coup before was dealt by. A record that drops the
    supervisor, or claims another procedure was in force, is a finding."""
    coups = by_coup(recorded)
    changed = next(c for c, ms in sorted(coups.items()) for m in ms for e in m.batch.events
                   if isinstance(e.data, baccarat_messages.CoupOpened) and e.data.procedure != e.data.in_force
                   and int(c[-6:]) > 1)
    assert verify_history(recorded).findings == []

    def tampered(coup: str, mutate: object) -> list[Stored]:
        out = {m.seq: m for m in _tamper(coups[coup], baccarat_messages.CoupOpened, mutate)[0]}
        return [out.get(m.seq, m) for m in recorded]

    undirected = verify_history(tampered(changed, lambda e: msgspec.structs.replace(e, supervisor=""))).findings
    assert [f.coup for f in undirected] == [changed], undirected
    assert "000 8.2" in undirected[0].what or "001 8.5" in undirected[0].what, undirected[0].what
    nxt = f"{changed[:-6]}{int(changed[-6:]) + 1:06d}"
    opened = next(e.data for m in coups[nxt] for e in m.batch.events if isinstance(e.data, baccarat_messages.CoupOpened))
    was = next(e.data.in_force for m in coups[changed] for e in m.batch.events
               if isinstance(e.data, baccarat_messages.CoupOpened))
    claimed = verify_history(tampered(nxt, lambda e: msgspec.structs.replace(
        e, in_force=was, supervisor=e.supervisor or "SUP-SIM"))).findings  # directed, from what was not in force
    assert [f.coup for f in claimed] == [nxt], claimed
    assert f"opened with {was} in force, but the coup before was dealt by {opened.procedure}" in claimed[0].what


def _tamper(stored: list[Stored], change: type, mutate: object) -> tuple[list[Stored], int]:
    """A copy with the first event of type ``change`` rewritten by ``mutate``."""
    out, seq = [], 0
    for m in copy(stored):
        events = list(m.batch.events)
        for i, e in enumerate(events):
            if not seq and isinstance(e.data, change):
                events[i] = msgspec.structs.replace(e, data=mutate(e.data))  # type: ignore[operator]
                seq = m.seq
        out.append(Stored(m.seq, m.subject, envelope.Batch(tuple(events)), m.msg_id))
    return out, seq


def _a_coup(recorded: list[Stored], game: str, holding: type = object) -> list[Stored]:
    """The first coup of ``game`` with an event of type ``holding`` (the shoe is
    shuffled anew each run: a blackjack coup may end on the dealer's blackjack
    before any player decides)."""
    return next(ms for ms in by_coup(recorded).values() if replay_coup(ms).game == game
                and any(isinstance(e.data, holding) for m in ms for e in m.batch.events))


@pytest.mark.parametrize("game", ["baccarat", "blackjack"])
def test_verify_catches_a_changed_card(recorded: list[Stored], game: str) -> None:
    coup = _a_coup(recorded, game)
    dealt = baccarat_messages.CardDealt if game == "baccarat" else blackjack_messages.CardDealt
    tampered, seq = _tamper(coup, dealt, lambda e: msgspec.structs.replace(e, card="KS" if e.card != "KS" else "QS"))
    findings = verify_coup(tampered)
    # The batch holds the dealer's later steps too, so the changed card may also show in what follows it.
    assert findings and findings[0].seq == seq and any("the shoe drew" in f.what for f in findings if f.seq == seq), \
        findings


def test_verify_reports_a_recorded_decision_the_rules_refuse(recorded: list[Stored]) -> None:
    coup = _a_coup(recorded, "blackjack", blackjack_messages.DecisionTaken)
    tampered, seq = _tamper(coup, blackjack_messages.DecisionTaken, lambda e: msgspec.structs.replace(e, seat=e.seat + 100))
    findings = verify_coup(tampered)
    assert findings and findings[0].seq == seq, findings
    # 002 (5) with a hole card, 003 7.4 without: each player in turn
    assert findings[0].what.startswith(("the rules refuse the recorded DecisionTaken: 002 (5): it is the turn of seat",
                                        "the rules refuse the recorded DecisionTaken: 003 7.4: it is the turn of seat")), \
        findings[0].what


def test_verify_reports_a_recorded_step_no_command_causes(recorded: list[Stored]) -> None:
    coup = _a_coup(recorded, "blackjack", blackjack_messages.DecisionTaken)
    tampered, seq = _tamper(coup, blackjack_messages.DecisionTaken, lambda e: blackjack_messages.HandCompleted(e.seat, e.hand, "stand"))
    findings = verify_coup(tampered)
    assert findings and findings[0].seq == seq and findings[0].what == "HandCompleted is not caused by any command", \
        findings


def test_verify_catches_a_changed_payout(recorded: list[Stored]) -> None:
    coup = _a_coup(recorded, "baccarat")

    def richer(e: settlement.CoupSettled) -> settlement.CoupSettled:
        first = msgspec.structs.replace(e.payouts[0], returned=e.payouts[0].returned + 100)
        return msgspec.structs.replace(e, payouts=(first, *e.payouts[1:]), returned=e.returned + 100)

    tampered, seq = _tamper(coup, settlement.CoupSettled, richer)
    findings = verify_coup(tampered)
    assert [f.seq for f in findings] == [seq] and "payouts" in findings[0].what


def test_verify_catches_a_changed_shoe_order(recorded: list[Stored]) -> None:
    shoes = [m for m in recorded if subjects.tokens(m.subject)[3] == "shoe"]
    assert verify_shoes(shoes) == []
    assert any(isinstance(e.data, shoe.ShoeEnded) for m in shoes for e in m.batch.events)

    def swapped(e: shoe.ShoeEnded) -> shoe.ShoeEnded:
        return msgspec.structs.replace(e, order=(e.order[1], e.order[0], *e.order[2:]))

    tampered, seq = _tamper(shoes, shoe.ShoeEnded, swapped)
    findings = verify_shoes(tampered)
    assert [f.seq for f in findings] == [seq] and "commitment" in findings[0].what


def test_verify_catches_a_revealed_order_that_is_not_a_full_set_of_cards(recorded: list[Stored]) -> None:
    # Both the shuffle's commitment and the revealed order rewritten: the hashes agree, the cards do not.
    shoes = [m for m in recorded if subjects.tokens(m.subject)[3] == "shoe"]
    ended = next(e.data for m in shoes for e in m.batch.events if isinstance(e.data, shoe.ShoeEnded))
    forged = (ended.order[1], *ended.order[1:])  # the second card twice, the first gone
    ours = [m for m in shoes if any(getattr(e.data, "shoe_id", "") == ended.shoe_id for e in m.batch.events)]
    tampered, _ = _tamper(ours, shoe.ShoeShuffled, lambda e: msgspec.structs.replace(
        e, commitment=shoe.commitment(forged, ended.salt)))
    tampered, seq = _tamper(tampered, shoe.ShoeEnded, lambda e: msgspec.structs.replace(e, order=forged))
    findings = verify_shoes(tampered)
    assert [f.seq for f in findings][:1] == [seq] and "full set" in findings[0].what


def test_an_event_written_under_an_older_schema_version_replays_and_verifies(recorded: list[Stored]) -> None:
    older, rewritten = [], 0
    for m in recorded:
        raw = json.loads(envelope.encode(m.batch))
        for e in raw["events"]:
            if e["type"] == "shoe.shuffled" and not e["data"]["burn_by_value"]:
                e["version"] = 1  # as written before burning by value existed
                del e["data"]["burn_by_value"]
                rewritten += 1
        older.append(Stored(m.seq, m.subject, envelope.decode(json.dumps(raw).encode()), m.msg_id))
    assert rewritten >= 3  # the blackjack tables' shoes
    upcast = [e for m in older for e in m.batch.events if e.type == "shoe.shuffled"]
    assert all(e.version == envelope.version_of("shoe.shuffled") and isinstance(e.data, shoe.ShoeShuffled)
               for e in upcast)
    report = verify_history(older)
    assert report.findings == [] and report.coups == 48


def the_shape_before_carrying(stored: list[Stored]) -> list[Stored]:
    """The record as it was written before a coup's message carried the
    shoe's steps: a coup message's steps before them (its betting closed, a
    choice), then the shoe's in a message of their own under the coup's shoe
    subject, then the cards dealt (sequences renumbered)."""
    out: list[Stored] = []
    for m in stored:
        table, shoe_id, coup, aggregate = subjects.tokens(m.subject)
        events = m.batch.events
        first = next((i for i, e in enumerate(events) if isinstance(e.data, envelope.CARRIED)), None)
        if aggregate != "coup" or first is None:
            out.append(Stored(3 * m.seq, m.subject, m.batch, m.msg_id))
            continue
        carried = tuple(e for e in events if isinstance(e.data, envelope.CARRIED))
        rest = tuple(e for e in events[first:] if not isinstance(e.data, envelope.CARRIED))
        parts = [(m.subject, events[:first]), (subjects.event(table, shoe_id, coup, "shoe"), carried), (m.subject, rest)]
        out += [Stored(3 * m.seq + i, subject, envelope.Batch(part), f"{m.msg_id}:{i}")
                for i, (subject, part) in enumerate(parts) if part]
    return out


def test_a_record_written_before_coups_carried_the_shoes_steps_replays_and_verifies(recorded: list[Stored]) -> None:
    """Each draw in the coup's own message (the shoe's record of it carried)
    or in a shoe message of its own, as records were written before: the same
    coups verify, replay to the same cards, and a changed card is caught in
    either shape."""
    assert any(subjects.tokens(m.subject)[3] == "coup" and isinstance(e.data, shoe.CardDrawn)
               for m in recorded for e in m.batch.events)  # the record of today carries them
    before = the_shape_before_carrying(recorded)
    assert not any(subjects.tokens(m.subject)[3] == "coup" and isinstance(e.data, shoe.CardDrawn)
                   for m in before for e in m.batch.events)
    report = verify_history(before)
    assert report.findings == [] and report.coups == 48
    now, then = by_coup(recorded), by_coup(before)
    def dealt(msgs: list[Stored]) -> list[tuple[int, str, str, str]]:
        return [(c.position, c.card, c.to, c.dealt_by) for c in replay_coup(msgs).cards]

    assert all(dealt(now[c]) == dealt(then[c]) for c in now)
    for record in (recorded, before):
        drawn = next(m for m in record if any(isinstance(e.data, shoe.CardDrawn) for e in m.batch.events))
        card = next(e.data.card for e in drawn.batch.events if isinstance(e.data, shoe.CardDrawn))
        forged = "AS" if card != "AS" else "KD"
        tampered, _ = _tamper([drawn], shoe.CardDrawn, lambda e, forged=forged: msgspec.structs.replace(e, card=forged))
        changed = [tampered[0] if m.seq == drawn.seq else m for m in record]
        assert any(f"shoe drew {forged}" in f.what for f in verify_history(changed).findings)


def test_records_from_before_a_steps_clause_or_the_holders_name_was_recorded_replay_and_verify(
        recorded: list[Stored]) -> None:
    """Cards dealt and burned, decisions, the shoe's holder, the openings before
    a coup: version 1 of each recorded no clause (or no player, no openings);
    such a record reads with them empty, and verifies as it did."""
    added = envelope.ADDED_SINCE
    older, rewritten = [], 0
    for m in recorded:
        raw = json.loads(envelope.encode(m.batch))
        for e in raw["events"]:
            if e["type"] in added:
                e["version"] = 1
                for field in added[e["type"]]:
                    del e["data"][field]
                rewritten += 1
        older.append(Stored(m.seq, m.subject, envelope.decode(json.dumps(raw).encode()), m.msg_id))
    kinds = {e.type for m in older for e in m.batch.events if e.type in added}
    # The store's tables are dealt from the shoe service's shuffle: a card-reading shoe's incidents of an older
    # version are read and verified in tests/e2e/test_incident_filing.py.
    assert rewritten > 100 and kinds == set(added) - {"coup.card_incident"}, kinds
    assert all(getattr(e.data, f) in ("", (), 0) for m in older for e in m.batch.events
               for f in added.get(e.type, ()))
    report = verify_history(older)
    assert report.findings == [] and report.coups == 48


def test_an_event_from_a_newer_schema_is_refused_not_guessed() -> None:
    raw = {"events": [{"id": "x", "type": "shoe.shuffled", "version": 9, "table": "T", "shoe": "S", "coup": "-",
                       "causation": "c", "correlation": "c", "producer": "shoe", "at": "2026-11-29T12:00:00Z",
                       "data": {"type": "shoe.shuffled"}}]}
    with pytest.raises(envelope.UnknownVersion):
        envelope.decode(json.dumps(raw).encode())


def test_replay_schema_is_documented() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "replay.md").read_text()
    for field in msgspec.structs.fields(__import__("casino.audit.replay", fromlist=["x"]).CoupReplay):
        assert f"`{field.name}`" in doc, field.name


def test_projections_rebuilt_from_the_first_event_equal_the_live_ones(recorded: Recorded) -> None:
    projector = Projector()
    projector.fold(recorded)
    rebuilt = projector.everything()
    assert rebuilt == recorded.live
    takings = {k: msgspec.json.decode(v) for (b, k), v in rebuilt.items() if b == "takings"}
    assert {t["coups_settled"] for t in takings.values()} == {12}
    settled = [e.data for m in recorded for e in m.batch.events if isinstance(e.data, settlement.CoupSettled)]
    assert sum(t["house_net"] for t in takings.values()) == sum(e.staked - e.returned for e in settled)
    shoes = [msgspec.json.decode(v) for (b, _), v in rebuilt.items() if b == "shoe_stats"]
    assert any(s["ended"] for s in shoes) and all(s["drawn"] + s["burned"] <= s["cards"] for s in shoes)


def test_the_live_projections_let_go_of_each_shoe_once_its_end_is_written(recorded: Recorded) -> None:
    """The ended shoes' figures are in the key-value bucket (above); in memory
    the service keeps only the shoes still in play, not every shoe ever dealt."""
    shoe_events = [e.data for m in recorded for e in m.batch.events if isinstance(e.data, shoe.ShoeEvent)]
    ended = {e.shoe_id for e in shoe_events if isinstance(e, shoe.ShoeEnded)}
    in_play = {e.shoe_id for e in shoe_events} - ended
    assert ended and recorded.held_shoes == in_play


async def _a_store_holding(stored: list[Stored], url: str) -> None:
    """A fresh stream holding ``stored`` in order, as written (sequences from 1)."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        await ensure_streams(js)
        for m in stored:
            await js.publish(m.subject, envelope.encode(m.batch), stream=STREAM)
    finally:
        await nc.close()


@contextlib.asynccontextmanager
async def _read_models(url: str) -> AsyncIterator[KvProjections]:
    """The read models' buckets, over a connection of their own."""
    nc = await nats.connect(url)
    try:
        yield await KvProjections(nc.jetstream()).open()
    finally:
        await nc.close()


async def _verified(url: str, workers: int) -> Report:
    nc = await nats.connect(url)
    try:
        return await verify_store(nc, workers)
    finally:
        await nc.close()


async def test_a_whole_store_verified_table_by_table_in_processes_reports_what_one_pass_does(
        recorded: list[Stored], tmp_path: Path) -> None:
    coup = _a_coup(recorded, "blackjack")
    tampered, _ = _tamper(coup, settlement.CoupSettled, lambda e: msgspec.structs.replace(e, returned=e.returned + 1))
    changed = {m.seq: m for m in tampered}
    stored = [changed.get(m.seq, m) for m in recorded]
    with nats_server(tmp_path) as url:
        await _a_store_holding(stored, url)
        one_pass = verify_history(stored)
        spread = await _verified(url, 2)
        alone = await _verified(url, 1)
    assert one_pass.findings and {f.coup for f in one_pass.findings} == {replay_coup(tampered).coup}
    for report in (spread, alone):
        assert (report.coups, report.shoes) == (one_pass.coups, one_pass.shoes) == (48, one_pass.shoes)
        assert sorted(report.findings, key=lambda f: (f.coup, f.seq)) == \
            sorted(one_pass.findings, key=lambda f: (f.coup, f.seq))


async def test_events_under_no_table_fail_the_verification_of_a_whole_store(
        recorded: list[Stored], tmp_path: Path) -> None:
    """Tables are found from their shoes' subjects: an event under a table that
    has none is not silently left out."""
    stray = next(m for m in reversed(recorded) if subjects.tokens(m.subject)[3] != "shoe")  # a shoe's would make one
    _, _, coup, aggregate = subjects.tokens(stray.subject)
    with nats_server(tmp_path) as url:
        await _a_store_holding([*recorded, Stored(0, subjects.event("STRAY-1", "STRAY-1-shoe-1", coup, aggregate),
                                                  stray.batch)], url)
        with pytest.raises(RuntimeError, match="not every event was verified"):
            await _verified(url, 2)


async def test_an_undecodable_event_is_a_finding_naming_its_coup_and_every_other_coup_verifies(
        recorded: list[Stored], tmp_path: Path) -> None:
    """A message that cannot be read, in a whole store verified in one or
    several processes: a finding under its coup (never a traceback naming no
    coup), and every coup verified as before."""
    whole = verify_history(recorded)
    coup = subjects.tokens(recorded[-1].subject)[2]
    with nats_server(tmp_path) as url:
        await _a_store_holding(recorded, url)
        nc = await nats.connect(url)
        await nc.jetstream().publish(recorded[-1].subject, b'{"events": [{"type": "coup.garbled"}]}', stream=STREAM,
                                     headers={"Nats-Msg-Id": "garbled"})
        await nc.close()
        for workers in (1, 2):
            report = await _verified(url, workers)
            assert [(f.coup, "cannot be read" in f.what) for f in report.findings] == [(coup, True)], report.findings
            assert report.coups == whole.coups


def recorded_reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int]]:
    """(filter, after, messages read) of each read of the store from now on."""
    reads: list[tuple[str, int, int]] = []
    scan_raw = JetStreamEventStore.scan_raw

    async def recording(self: JetStreamEventStore, filter_: str, each: Callable[..., object], after: int = 0,
                        limit: int | None = None) -> None:
        count = 0

        def counted(*message: Any) -> None:
            nonlocal count
            count += 1
            each(*message)

        await scan_raw(self, filter_, counted, after, limit)
        reads.append((filter_, after, count))

    monkeypatch.setattr(JetStreamEventStore, "scan_raw", recording)
    return reads


def _folded(stored: list[Stored]) -> Projector:
    projector = Projector()
    projector.fold(stored)
    return projector


def test_a_checkpoint_restores_the_whole_fold_and_only_its_own_version(
        recorded: Recorded, monkeypatch: pytest.MonkeyPatch) -> None:
    projector = _folded(recorded)
    restored = Projector.from_checkpoint(projector.checkpoint())
    assert restored is not None
    assert (restored.seq, restored.everything()) == (projector.seq, projector.everything())
    data = projector.checkpoint()
    monkeypatch.setattr(projections, "FOLD_VERSION", projections.FOLD_VERSION + 1)
    assert Projector.from_checkpoint(data) is None  # the fold changed: fold again from the first event


async def test_keys_written_after_the_last_checkpoint_are_written_again_the_same(
        recorded: Recorded, nats_url: str) -> None:
    """A stop between writing a batch's keys and the next checkpoint: the fold
    on from the checkpoint applies those events again to the state before them,
    so nothing is counted twice."""
    half = len(recorded) // 2
    async with _read_models(nats_url) as kv:
        before = _folded(recorded[:half])
        await kv.put(before, set(before.everything()))
        await kv.save(before)
        ahead = _folded(recorded[:half])
        await kv.put(ahead, ahead.fold(recorded[half:]))  # and stopped before its checkpoint

        resumed = await kv.restore()
        assert resumed is not None and resumed.seq == recorded[half - 1].seq
        await kv.put(resumed, resumed.fold(recorded[half:]))
        whole = _folded(recorded).everything()
        assert await kv.values(whole) == whole


async def test_the_projections_service_restarts_from_its_checkpoint(
        recorded: Recorded, nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    half = len(recorded) // 2
    await _a_store_holding(recorded[:half], nats_url)
    first = await runner.start("projections", nats_url)  # folds the first half, checkpointed
    await first.stop()
    await _a_store_holding(recorded[half:], nats_url)

    reads = recorded_reads(monkeypatch)
    second = await runner.start("projections", nats_url)
    try:
        assert reads[0][:2] == (f"{subjects.EVENTS}.>", half)  # on from the checkpoint,
        assert all(after for _, after, _ in reads)  # not from the first event
        whole = _folded(recorded)
        async with _read_models(nats_url) as kv:
            assert await kv.seq() == len(recorded)
            assert await kv.values(whole.everything()) == whole.everything()
            whole.forget_ended_shoes()
            assert set(second.service.shoe_stats) == set(whole.shoe_stats)
    finally:
        await second.stop()


async def test_a_first_fold_of_the_whole_stream_holds_a_page_at_a_time_and_checkpoints_each(
        recorded: Recorded, nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A first start on a long history (or a new version of the fold) reads
    the stream page by page: memory for a page, not the history, and a stop
    in the middle goes on from the last page's checkpoint."""
    await _a_store_holding(recorded, nats_url)
    monkeypatch.setattr(projections, "FOLD_PAGE", 50)
    saved: list[int] = []
    save = KvProjections.save

    async def saving(self: KvProjections, projector: Projector) -> None:
        saved.append(projector.seq)
        await save(self, projector)

    monkeypatch.setattr(KvProjections, "save", saving)
    reads = recorded_reads(monkeypatch)
    service = await runner.start("projections", nats_url)
    await service.stop()
    pages = [n for flt, _, n in reads if flt == f"{subjects.EVENTS}.>"]
    assert sum(pages) == len(recorded) and max(pages) == 50 and len(pages) == len(recorded) // 50 + 1
    assert saved[:len(pages)] == [min(50 * k, len(recorded)) for k in range(1, len(pages) + 1)]
    async with _read_models(nats_url) as kv:
        whole = _folded(recorded).everything()
        assert await kv.values(whole) == whole


async def test_the_projections_service_stopping_saves_its_last_checkpoint(
        recorded: Recorded, nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    half = len(recorded) // 2
    await _a_store_holding(recorded[:half], nats_url)
    monkeypatch.setattr(projections_service, "CHECKPOINT_EVERY", 3600.0)  # none while it runs, but at its start
    service = await runner.start("projections", nats_url)
    await _a_store_holding(recorded[half:], nats_url)
    async with _read_models(nats_url) as kv:
        while await kv.seq() < len(recorded):
            await asyncio.sleep(0.05)
        before = await kv.restore()
        await service.stop()
        after = await kv.restore()
        assert before is not None and before.seq == half
        assert after is not None and after.seq == len(recorded)
        assert after.everything() == service.service.everything()


async def test_projections_rebuilt_page_by_page_equal_the_live_ones(
        recorded: Recorded, nats_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    await _a_store_holding(recorded, nats_url)
    live = await runner.start("projections", nats_url)
    monkeypatch.setattr(projections, "FOLD_PAGE", 50)
    reads = recorded_reads(monkeypatch)
    nc = await nats.connect(nats_url)
    try:
        assert await rebuild_projections(JetStreamEventStore(nc), nc) == 0
    finally:
        await nc.close()
        await live.stop()
    entries = len(_folded(recorded).everything())
    assert f"rebuilt {entries} read-model entries up to stream sequence {len(recorded)}, sealed shoes and live: equal to the live " \
        "ones" in capsys.readouterr().out
    assert max(n for _, _, n in reads) == 50


def test_a_coup_named_as_the_dealer_policy_names_it_gives_its_table_to_read_it_from() -> None:
    """A coup read across every table has the server match every table and
    shoe the stream has held; the replay and verify commands name its table."""
    assert subjects.table_of_coup("BAC000-1-000042") == "BAC000-1"
    assert subjects.coup_filter("BAC000-1-000042", subjects.table_of_coup("BAC000-1-000042")) == \
        "casino.ev.BAC000-1.*.BAC000-1-000042.>"
    assert [subjects.table_of_coup(c) for c in ("c1", "T-x", "-000001")] == ["*", "*", "*"]


def test_verify_holds_each_coup_to_the_openings_before_it_and_no_command_to_two_openings(
        recorded: list[Stored]) -> None:
    """Each coup's coup.configured names the openings of the coups before it
    (digests of their command ids): one that leaves an opening out, or a coup
    opened by a command that had opened an earlier coup, is a finding."""
    table = next(e.data.table for m in recorded for e in m.batch.events if isinstance(e.data, envelope.CoupConfigured)
                 and e.data.coup_number == 3)
    history = [m for m in recorded if subjects.tokens(m.subject)[0] == table]
    third = f"{table}-000003"

    def rewritten(change: object) -> list[Stored]:
        return [Stored(m.seq, m.subject, envelope.Batch(tuple(
            msgspec.structs.replace(e, data=change(e)) if isinstance(e.data, envelope.CoupConfigured)  # type: ignore[operator]
            and e.data.coup_number == 3 else e for e in m.batch.events)), m.msg_id) for m in history]

    assert verify_history(history).findings == []
    left_out = verify_history(rewritten(lambda e: msgspec.structs.replace(e.data, opened_before=e.data.opened_before[1:])))
    # The coup altered, and the next, whose record no longer follows from the altered one.
    assert [(f.coup, "does not name the openings" in f.what) for f in left_out.findings] == [
        (third, True), (f"{table}-000004", True)], left_out
    opened_by = next(e.causation for m in history for e in m.batch.events if isinstance(e.data, envelope.CoupConfigured)
                     and e.data.coup_number == 1)
    twice = verify_history([Stored(m.seq, m.subject, envelope.Batch(tuple(
        msgspec.structs.replace(e, causation=opened_by) if isinstance(e.data, envelope.CoupConfigured)
        and e.data.coup_number == 3 else e for e in m.batch.events)), m.msg_id) for m in history])
    assert any(f.coup == third and f"opened by command {opened_by}" in f.what for f in twice.findings), twice


def test_verify_holds_every_direction_to_the_roster_recorded_with_the_coup(recorded: list[Stored]) -> None:
    """Each coup records the casino's roster of supervisors; a direction in
    its record from a name not on that roster is a finding."""
    coups = by_coup(recorded)
    directed = next(c for c, ms in sorted(coups.items()) for m in ms for e in m.batch.events
                    if isinstance(e.data, baccarat_messages.CoupOpened) and e.data.supervisor)
    roster = next(e.data.supervisors for m in coups[directed] for e in m.batch.events
                  if isinstance(e.data, envelope.CoupConfigured))
    assert roster and verify_history(recorded).findings == []
    out = {m.seq: m for m in _tamper(coups[directed], baccarat_messages.CoupOpened,
                                     lambda e: msgspec.structs.replace(e, supervisor="SUP-NOBODY"))[0]}
    findings = verify_history([out.get(m.seq, m) for m in recorded]).findings
    assert any(f.coup == directed and "SUP-NOBODY, who is not on the roster" in f.what for f in findings), findings


def test_a_blackjack_payout_names_the_player_and_one_recorded_before_it_did_verifies(recorded: list[Stored]) -> None:
    """Every event about a player names the player: a blackjack box's payout
    names whoever placed its wager. A settlement of version 1 named nobody on
    a box: it verifies as recorded; one of version 2 with a name taken out is
    a finding."""
    settled = [(m, e) for m in recorded for e in m.batch.events if isinstance(e.data, settlement.CoupSettled)
               and any(p.bet == "box" for p in e.data.payouts)]
    assert settled and all(p.player for _, e in settled for p in e.data.payouts if p.bet == "box"), settled[:1]
    m, e = settled[0]

    def with_payouts(version: int) -> list[Stored]:
        blank = msgspec.structs.replace(e, version=version, data=msgspec.structs.replace(e.data, payouts=tuple(
            msgspec.structs.replace(p, player="") for p in e.data.payouts)))
        changed = Stored(m.seq, m.subject, envelope.Batch(tuple(blank if x is e else x for x in m.batch.events)),
                         m.msg_id)
        return [changed if x is m else x for x in recorded]

    assert verify_history(with_payouts(1)).findings == []
    coup = subjects.tokens(m.subject)[2]
    assert [f.coup for f in verify_history(with_payouts(2)).findings] == [coup]
