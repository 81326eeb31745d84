"""An insider with the dealer-policy's credential appends a readable opening
out of turn: under a coup number far ahead of the table's, and under the
table's next coup naming another. On a real nats-server with the
permission model applied, the dealer-policy passes each over (live, and when
it rebuilds the table from the record), the table deals on with its own
next coup, and verification names each forged coup and exits non-zero."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from casino.audit.archive import history
from casino.audit.audits import verify_history
from casino.config.tables import TableConfig
from casino.nats import permissions as natsauth
from casino.store import subjects
from casino.store.envelope import CoupConfigured
from casino.store.jetstream import STREAM, JetStreamEventStore
from tests.security.secured import Secured, secured_casino

pytestmark = pytest.mark.anyio
TABLE = "BAC000-1"
HOSTILE = "<img src=x onerror=alert(1)>\x1b[2J"


async def forge(casino: Secured, copied: int, number: int, names: int) -> str:
    """Coup ``copied``'s opening, as the record holds it, appended with the
    dealer-policy's credential under coup ``number``'s subject, naming coup
    ``names``, its supervisor and approval reference made hostile. The forged coup's id."""
    nc = await casino.connect("dealer-policy")
    try:
        source = f"{TABLE}-{copied:06d}"
        first = (await JetStreamEventStore(nc).read(subjects.event(TABLE, "*", source, "coup")))[0]
        raw = await nc.jetstream().get_msg(STREAM, first.seq, direct=True)
        batch: dict[str, Any] = msgspec.json.decode(raw.data or b"")
        forged = f"{TABLE}-{number:06d}"
        for envelope in batch["events"]:
            envelope["coup"] = f"{TABLE}-{names:06d}"
            data = envelope["data"]
            if data.get("type") == "coup.configured":
                data["coup_number"] = names
            if str(data.get("type")).endswith("coup_opened"):
                data["coup_id"], data["supervisor"] = f"{TABLE}-{names:06d}", HOSTILE
            for approval in data.get("approvals", ()):
                approval["reference"] = HOSTILE
        _, shoe, _, _ = subjects.tokens(first.subject)
        await nc.jetstream().publish(subjects.event(TABLE, shoe, forged, "coup"), msgspec.json.encode(batch),
                                     stream=STREAM, headers={"Nats-Msg-Id": f"forged-{number}-{names}"})
        return forged
    finally:
        await nc.close()


async def numbers_dealt(casino: Secured) -> list[int]:
    """The numbers of the table's coups opened (as their openings name them), in the record's order."""
    nc = await casino.connect("compliance")
    try:
        stored = await history(nc).read(subjects.aggregate_filter("coup", TABLE))
    finally:
        await nc.close()
    return [e.data.coup_number for m in stored for e in m.batch.events
            if isinstance(e.data, CoupConfigured) and m.msg_id and not m.msg_id.startswith("forged")]


async def test_a_forged_opening_out_of_turn_is_passed_over_the_table_deals_on_and_verify_names_it(
        tmp_path: Path) -> None:
    tables = {TABLE: TableConfig("baccarat-000-methods", supervisors=natsauth.SIMULATED_SUPERVISORS)}
    async with secured_casino(tmp_path, tables) as casino:
        await casino.deal(4)
        far = await forge(casino, 4, 9999, 9999)  # a coup far ahead, as the table's latest coup
        await casino.stop_services()  # the dealer-policy rebuilds the table from the record: the latest is forged
        await casino.start_services()
        await casino.deal(3)
        assert await numbers_dealt(casino) == [1, 2, 3, 4, 5, 6, 7]
        wrong = await forge(casino, 7, 8, 7)  # live: under the table's next coup, naming coup 7
        await casino.deal(2)
        assert await numbers_dealt(casino) == [1, 2, 3, 4, 5, 6, 7, 8, 9]

        nc = await casino.connect("compliance")
        try:
            report = verify_history(await history(nc).read(f"{subjects.EVENTS}.>"))
        finally:
            await nc.close()
        found: dict[str, list[str]] = {}
        for f in report.findings:
            found.setdefault(f.coup, []).append(f.what)
        assert set(found) == {far, wrong}, report.findings
        assert any("opened as number 9999, and the table's coup before it is 4" in w for w in found[far]), found
        assert any("never finished, and" in w for w in found[far]), found
        assert any(f"directed by {HOSTILE}, who is not on the roster" in w for w in found[far]), found
        assert any(f"names coup 7 of table {TABLE}, not the coup it is recorded under" in w for w in found[wrong])
        assert report.coups == 9  # coup 8 with the forged opening in its record, verified as it stands

        verify = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "casino.cli.main", "verify", "--nats", casino.url("compliance"),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        printed = (await verify.communicate())[0].decode()
        assert verify.returncode not in (0, None), printed
        assert far in printed and wrong in printed and "\x1b" not in printed and "<img" in printed, printed


async def test_a_forged_opening_in_turn_is_dealt_as_the_coup_the_shoe_started_and_verify_names_what_it_forged(
        tmp_path: Path) -> None:
    """An opening in turn (the table's next number, its content a copy of the
    coup before's, the supervisor hostile) is followed as the coup in play:
    the shoe started that round as the coup before ended, so it is dealt and
    settled, and the table deals on. Verification names the forged roster
    direction and the openings the record does not name."""
    tables = {TABLE: TableConfig("baccarat-000-methods", supervisors=natsauth.SIMULATED_SUPERVISORS)}
    async with secured_casino(tmp_path, tables) as casino:
        await casino.deal(2)
        forged = await forge(casino, 2, 3, 3)
        await casino.deal(2)
        assert await numbers_dealt(casino) == [1, 2, 4]
        nc = await casino.connect("compliance")
        try:
            report = verify_history(await history(nc).read(f"{subjects.EVENTS}.>"))
        finally:
            await nc.close()
        assert report.coups == 4 and {f.coup for f in report.findings} == {forged}, report.findings
        assert any("not on the roster" in f.what for f in report.findings)
        assert any("does not name the openings of the coups before it" in f.what for f in report.findings)
