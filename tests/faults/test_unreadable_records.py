"""What the record holds is read leniently and shown escaped, never trusted
to be well-formed: a message appended with the dealer-policy's own
credential that the readers could not take (text the commands refuse, bytes
that are no batch) once made `casino replay` and `casino verify` end in a
traceback, the table answer `internal` to every command for good, and the
archiver's sweep fail. Now the table goes on with its next coup (the bad one
held for compliance), verification names the coup and verifies every other,
and the archiver seals around it. On a real nats-server with the permission
model applied."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from nats.aio.client import Client

from casino.audit.archive import history
from casino.audit.replay import replay_coup
from casino.cli.replay import coup_text
from casino.config.tables import TableConfig
from casino.nats import permissions as natsauth
from casino.protocol import commands
from casino.rules.shoe import ShoeEnded
from casino.store import envelope, subjects
from casino.store.archive import SealStore
from casino.store.eventstore import read_stored
from casino.store.jetstream import JetStreamEventStore
from tests.security.secured import Secured, secured_casino
from tests.variants import ruleset_variant

pytestmark = pytest.mark.anyio
TABLE = "BAC-1"
ESCAPES = "\x1b[2J\x1b[1;1H verified: no findings \u202e"  # clears an officer's screen and draws a false verdict


def cli(casino: Secured, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "casino.cli.main", *args, "--nats", casino.url("compliance")],
                          capture_output=True, text=True, timeout=120)


async def ask(nc: Client, kind: str, command: commands.Command) -> commands.Reply:
    return commands.reply_decoder.decode((await nc.request(subjects.command(TABLE, kind), commands.encoder.encode(
        command), timeout=10)).data)


async def coup_subject(store: JetStreamEventStore, coup: str) -> str:
    """The subject of the coup's own events (the shoe may have started its round there first)."""
    return next(m.subject for m in await store.read(subjects.coup_filter(coup, TABLE))
                if subjects.tokens(m.subject)[3] == "coup")


def with_reference(batch: envelope.Batch, reference: str) -> bytes:
    """The batch of a coup's opening, its approvals' references made ``reference`` (an earlier release let such
    text into the record), as JSON."""
    raw = json.loads(envelope.encode(batch))
    for e in raw["events"]:
        if e["type"] == "baccarat.coup_opened":
            e["data"]["approvals"] = [{"what": "method_b", "by": "inspector", "reference": reference}]
    return json.dumps(raw).encode()


async def test_a_record_the_readers_could_not_take_is_read_shown_escaped_and_stops_no_table(tmp_path: Path) -> None:
    one_deck = ruleset_variant(tmp_path, "baccarat-000-methods", decks=1, penetration=0.5)
    tables = {TABLE: TableConfig(one_deck, procedure="method_a")}
    async with secured_casino(tmp_path, tables) as casino:
        await casino.deal(3)
        writer = await casino.connect("dealer-policy")  # the owner's own credential: a fault, or stolen
        terminal = await casino.connect(f"terminal-{TABLE}")
        compliance = await casino.connect("compliance")
        store = JetStreamEventStore(compliance)

        # 1. Text the commands refuse, in an opening appended to a coup dealt to its end.
        finished = f"{TABLE}-000003"
        opening = next(m for m in await store.read(subjects.coup_filter(finished, TABLE))
                       if any(e.type == "baccarat.coup_opened" for e in m.batch.events))
        await writer.jetstream().publish(opening.subject, with_reference(opening.batch, ESCAPES),
                                         headers={"Nats-Msg-Id": "dealer-policy:forged-text"}, timeout=30)
        shown = cli(casino, "replay", "coup", TABLE, "3")
        assert shown.returncode == 0 and "\x1b" not in shown.stdout and "\u202e" not in shown.stdout, shown
        assert "\\x1b[2J" in shown.stdout  # shown as an escape, in the approvals the forged opening names
        assert "\\u001b[2J" in cli(casino, "replay", "coup", TABLE, "3", "--json").stdout  # JSON's own escape

        # 2. Bytes that are no batch, written as the dealer-policy writes, in the coup being dealt.
        opened = await ask(terminal, "coup", commands.OpenCoup(id="open-4", table=TABLE, number=4))
        assert opened.ok and opened.coup == f"{TABLE}-000004", opened
        await ask(terminal, "wager", commands.PlaceWager(id="w-4", table=TABLE, coup=opened.coup, seat=1,
                                                         bet="banker", amount=5000))
        await writer.jetstream().publish(await coup_subject(store, opened.coup), b"\x00\xff not a batch",
                                         headers={"Nats-Msg-Id": "dealer-policy:forged-bytes"}, timeout=30)
        refused = await ask(terminal, "coup", commands.CloseBetting(id="close-4", table=TABLE, coup=opened.coup))
        assert (refused.ok, refused.clause) == (False, commands.HELD) and "cannot be read" in refused.reason, refused
        status = await ask(terminal, "coup", commands.Status(id="status-4", table=TABLE))
        assert status.waiting is not None and (status.coup, status.waiting.kind) == (opened.coup, "held"), status

        # The table goes on with its next coup, and after a restart of every service as well.
        await casino.deal(2)
        await casino.stop_services()
        await casino.start_services()
        await casino.deal(12)
        held = [e.data for m in await history(compliance).read(subjects.coup_filter(opened.coup, TABLE))
                for e in m.batch.events if isinstance(e.data, envelope.CoupHeld)]  # live, or sealed already
        assert len(held) == 1 and "cannot be read" in held[0].reason, held

        # verify names both coups, verifies every other, and exits non-zero; no traceback.
        verified = cli(casino, "verify", "--workers", "1")
        assert verified.returncode == 1 and "Traceback" not in verified.stderr, verified
        named = {line.split(":")[0] for line in verified.stdout.splitlines() if line.startswith(TABLE)}
        assert named == {finished, opened.coup}, verified.stdout
        assert "verified 18 coups" in verified.stdout, verified.stdout  # the held coup among them

        # The archiver seals around them: their shoes sealed whole, the messages kept as stored.
        archiver = next(r for r in casino.running if r.kind == "archiver").service
        seals = SealStore(compliance)
        for _ in range(150):  # until the shoe the held coup was dealt from is sealed
            await archiver.sweep()
            if max((k.last_coup for k in await seals.seals(TABLE)), default=0) >= 4:
                break
            await asyncio.sleep(0.2)
        assert max(k.last_coup for k in await seals.seals(TABLE)) >= 4
        sealed = cli(casino, "verify", "--sealed", "--table", TABLE)
        assert sealed.returncode == 1 and opened.coup in sealed.stdout and finished in sealed.stdout, sealed
        for nc in (writer, terminal, compliance):
            await nc.close()


def test_a_record_written_by_an_earlier_release_with_text_the_commands_refuse_reads_and_replays_escaped() -> None:
    """``baccarat.coup_opened`` of version 1 (before the holder's player and
    who directed were recorded) whose approval's reference holds an escape
    sequence, as an earlier release let into the record: it reads (upcast),
    and a replay shows the escape, never acts on it."""
    at = "2026-11-29T12:00:00Z"

    def event(n: int, type_: str, version: int, data: dict[str, object]) -> dict[str, object]:
        return {"id": f"e{n}", "type": type_, "version": version, "table": TABLE, "shoe": f"{TABLE}-shoe-1",
                "coup": f"{TABLE}-000001", "causation": "open-1", "correlation": "c", "producer": "dealer-policy",
                "at": at, "data": {"type": type_, **data}}

    batch = {"events": [
        event(0, "coup.configured", 1, {"table": TABLE, "game": "baccarat", "ruleset": "baccarat-000-methods",
                                        "ruleset_digest": "0" * 16, "coup_number": 1}),
        event(1, "baccarat.coup_opened", 1, {
            "coup_id": f"{TABLE}-000001", "procedure": "method_b", "shoe_holder": None, "clause": "000 8.4",
            "approvals": [{"what": "method_b", "by": "inspector", "reference": ESCAPES}]})]}
    stored = read_stored(7, subjects.event(TABLE, f"{TABLE}-shoe-1", f"{TABLE}-000001", "coup"),
                         json.dumps(batch).encode(), "dealer-policy:open-1")
    assert not stored.unreadable, stored.unreadable
    opened = stored.batch.events[1].data
    assert opened.approvals[0].reference == ESCAPES  # type: ignore[union-attr]
    shown = coup_text(replay_coup([stored])) + coup_text(replay_coup([stored]), as_json=True)
    assert "\x1b" not in shown and "\u202e" not in shown and "\\x1b[2J" in shown and "\\u202e" in shown


def test_bytes_that_are_no_batch_are_handed_on_with_why_never_raised() -> None:
    for data in (b"\x00\xff", b'{"type":"io.nats.jetstream.api.v1.stream_info_response"}',
                 msgspec.json.encode({"events": [{"type": "x"}]})):
        stored = read_stored(3, "casino.ev.T.T-shoe-1.T-000001.coup", data)
        assert stored.batch.events == () and stored.unreadable and stored.raw == data


async def test_a_stray_the_server_writes_at_a_readers_request_holds_no_coup(tmp_path: Path) -> None:
    """The server answers a JetStream request on whatever reply subject it
    names, an event subject included: a reader's credential (the floor's)
    can have a stray written under each subject of the coup being dealt (its
    round at the shoe, its book, the coup). It is no record of ours (no
    message id): passed over and counted by each guard, the coup dealt to its
    end, and verification names it under the coup."""
    tables = {TABLE: TableConfig("baccarat-000-methods", procedure="method_a")}
    async with secured_casino(tmp_path, tables) as casino:
        terminal, floor = await casino.connect(f"terminal-{TABLE}"), await casino.connect("floor")
        compliance = await casino.connect("compliance")
        opened = await ask(terminal, "coup", commands.OpenCoup(id="open-1", table=TABLE, number=1))
        await ask(terminal, "wager", commands.PlaceWager(id="w-1", table=TABLE, coup=opened.coup, seat=1,
                                                         bet="banker", amount=5000))
        for m in await JetStreamEventStore(compliance).read(subjects.coup_filter(opened.coup, TABLE)):
            await floor.publish(f"$JS.API.STREAM.INFO.{natsauth.STREAM}", b"", reply=m.subject)  # each aggregate's
        await floor.flush()
        await asyncio.sleep(0.5)
        closed = await ask(terminal, "coup", commands.CloseBetting(id="close-1", table=TABLE, coup=opened.coup))
        assert closed.ok and closed.waiting is not None and closed.waiting.kind == "finished", closed
        stored = await JetStreamEventStore(compliance).read(subjects.coup_filter(opened.coup, TABLE))
        assert any(m.unreadable and not m.msg_id for m in stored)  # the stray is in the record
        for _ in range(50):
            verified = cli(casino, "verify", "--table", TABLE)
            if "verified 1 coups" in verified.stdout:
                break
            await asyncio.sleep(0.2)
        assert verified.returncode == 1 and "written by no service of ours" in verified.stdout, verified
        assert not any(isinstance(e.data, ShoeEnded) for m in stored for e in m.batch.events)
        for nc in (terminal, floor, compliance):
            await nc.close()
