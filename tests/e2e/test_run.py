"""`casino run` (what `make run` calls): the embedded server, the four services
as processes and the simulator; with --coups it exits 0 once every coup of every
table is settled, and a second run continues the same store."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from casino.cli.simulator import SimulatedTable
from casino.config.tables import TableConfig
from casino.nats import client as natsclient
from casino.nats import permissions as natsauth
from casino.nats.server import NatsServer, free_port
from casino.rules import settlement
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.blackjack import messages as blackjack_messages
from casino.store import subjects
from casino.store.envelope import CoupConfigured
from casino.store.jetstream import JetStreamEventStore

pytestmark = pytest.mark.anyio


def compliance(var: Path) -> str:
    """The compliance user's password that `casino run` made."""
    return str(json.loads((var / natsauth.AUTH_FILE).read_text())["compliance"])


def run(var: Path, coups: int, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "casino.cli.main", "run", "--coups", str(coups), "--var", str(var),
         "--port", str(free_port()), "--seed", "7", *more],
        capture_output=True, text=True, timeout=300)


def test_casino_run_with_two_instances_of_every_service_deals_coups_that_verify(tmp_path: Path) -> None:
    dealt = run(tmp_path, 6, "--replicas", "2")
    assert dealt.returncode == 0, dealt.stdout + dealt.stderr
    logs = sorted(p.name for p in (tmp_path / "logs").glob("*-2.log"))
    assert logs == ["archiver-2.log", "dealer_policy-2.log", "projections-2.log", "settlement-2.log", "shoe-2.log",
                    "wager-2.log"]
    verified = subprocess.run([sys.executable, "-m", "casino.cli.main", "verify", "--var", str(tmp_path)],
                              capture_output=True, text=True, timeout=120)
    assert verified.returncode == 0 and "verified 24 coups" in verified.stdout, verified.stdout + verified.stderr


async def test_casino_run_deals_every_coup_to_settlement_and_a_second_run_continues(tmp_path: Path) -> None:
    first = run(tmp_path, 3)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "every coup dealt and settled" in first.stdout
    second = run(tmp_path, 2)
    assert second.returncode == 0, second.stdout + second.stderr

    with NatsServer(tmp_path / "nats", config=tmp_path / natsauth.CONFIG_FILE) as server:  # the store as run left it
        nc = await natsclient.connect(natsauth.with_credentials(server.url, "compliance", compliance(tmp_path)))
        events = [(m.subject, e.data) for m in await JetStreamEventStore(nc).read(f"{subjects.EVENTS}.>")
                  for e in m.batch.events]
        await nc.close()
    tables = {e.table for _, e in events if isinstance(e, CoupConfigured)}
    assert tables == {"BAC000-1", "BAC001-1", "BJ002-1", "BJ003-1"}
    numbers = sorted((e.table, e.coup_number) for _, e in events if isinstance(e, CoupConfigured))
    assert numbers == sorted((t, n) for t in tables for n in range(1, 6))
    resulted = [s for s, e in events if isinstance(e, baccarat_messages.CoupResulted | blackjack_messages.CoupResulted)]
    settled = [e for _, e in events if isinstance(e, settlement.CoupSettled)]
    assert len(resulted) == len(settled) == 20
    assert {subjects.tokens(s)[2] for s in resulted} == {e.coup_id for e in settled}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "casino.cli.main", *args, "--var", str(tmp_path)],
                              capture_output=True, text=True, timeout=120)

    verified = cli("verify")
    assert verified.returncode == 0 and "verified 20 coups" in verified.stdout, verified.stdout + verified.stderr
    shown = cli("replay", "coup", "BJ002-1", "2", "--json", "--svg", str(tmp_path / "c.svg"))
    replay = json.loads(shown.stdout)
    assert (replay["schema"], replay["coup"], replay["settled"]) == ("casino.replay.coup/1", "BJ002-1-000002", True)
    assert replay["casino"] == "Simulated casino" and replay["record_made"] and replay["replayed"], replay
    # money in the table's currency, recorded with the coup; its net the house's (+: the house won)
    assert replay["currency"] == "EUR" and replay["house_net"] == sum(p["stake"] - p["returned"]
                                                                      for p in replay["payouts"]), replay
    shown_text = cli("replay", "coup", "BJ002-1", "2").stdout
    assert "House net: EUR " in shown_text and " hand 1 " in shown_text and " hand 0" not in shown_text, shown_text
    assert (tmp_path / "c.svg").read_text().startswith("<svg")
    listed = cli("replay", "table", "BAC000-1", "--from", "2", "--to", "4")
    heading, _, *lines = listed.stdout.splitlines()
    assert heading.startswith("Casino 'Simulated casino', record made 20") and "; replayed 20" in heading, heading
    assert [line.split()[0] for line in lines] == [f"BAC000-1-00000{n}" for n in (2, 3, 4)]
    shoe = cli("replay", "shoe", "BAC001-1-shoe-1")
    assert "In play: " in shoe.stdout and len(shoe.stdout.split("Coups dealt from it:\n")[1].splitlines()) == 6
    one = cli("verify", "--coup", "BAC000-1-000003")
    assert one.returncode == 0 and "verified 1 coups" in one.stdout, one.stdout + one.stderr
    shoe_verified = cli("verify", "--shoe", "BAC001-1-shoe-1")
    assert shoe_verified.returncode == 0 and "verified 5 coups" in shoe_verified.stdout, shoe_verified.stdout
    rebuilt = cli("projections", "rebuild")
    assert "equal to the live ones" in rebuilt.stdout, rebuilt.stdout
    exported = cli("export", "--table", "BJ002-1", str(tmp_path / "BJ002-1.export"))  # no shoe has ended yet
    assert exported.returncode == 0 and "marked as not sealed, BJ002-1-shoe-1" in exported.stdout, exported
    from_file = cli("verify", "--file", str(tmp_path / "BJ002-1.export"))
    assert from_file.returncode == 3 and "verified 5 coups" in from_file.stdout, from_file  # not sealed: not proven


async def test_a_paced_table_opens_a_coup_every_so_many_seconds() -> None:
    """The benchmark's half load: a paced table opens its coups at a steady
    interval (never sooner), and starts after its offset."""
    table = SimulatedTable("B", TableConfig("baccarat-000-methods"), None, random.Random(1),  # type: ignore[arg-type]
                           lambda coup: asyncio.Event(), None)  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()
    opened: list[float] = []

    async def one_coup() -> None:
        opened.append(loop.time())
        await asyncio.sleep(0.01)  # the coup itself takes less than the interval

    table.one_coup = one_coup  # type: ignore[method-assign]
    start = loop.time()
    await table.play(4, every=0.05, first=0.03)
    assert len(opened) == 4 and opened[0] - start >= 0.03
    assert all(later - earlier >= 0.05 for earlier, later in itertools.pairwise(opened))


def _processes_using(path: Path) -> list[str]:
    """The command lines of the processes naming ``path`` (the services and the server of a run under it)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if str(path) in (line := cmdline.read_bytes().replace(b"\0", b" ").decode()):
                found.append(line)
    return found


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "polite-kill"])
async def test_ctrl_c_or_a_polite_kill_stops_everything_in_order_and_a_second_run_continues(
        tmp_path: Path, sig: signal.Signals) -> None:
    """`make run` stopped while every table deals: exit 0 with nothing on
    standard error (no traceback of a task the signal interrupted, no service
    that had to be killed: the dealer-policy stops before the shoe it asks for
    a round's end), no process left behind, the read models at the end of the
    stream (the projections stop last); a second run continues the store and
    the whole store verifies."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "casino.cli.main", "run", "--var", str(tmp_path), "--port", str(free_port()), "--seed", "7",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    while b"dealing at" not in (line := await asyncio.wait_for(proc.stdout.readline(), 60)):
        assert line, "casino run ended before dealing"
    await asyncio.sleep(4)  # every table in the middle of its coups
    proc.send_signal(sig)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0 and b"stopping" in out and err == b"", err.decode()
    assert _processes_using(tmp_path) == []
    # The projections stopped last, having read every event the others wrote as they stopped.
    rebuilt = subprocess.run([sys.executable, "-m", "casino.cli.main", "projections", "rebuild", "--var", str(tmp_path)],
                             capture_output=True, text=True, timeout=120)
    assert rebuilt.returncode == 0 and "equal to the live ones" in rebuilt.stdout, rebuilt.stdout + rebuilt.stderr

    again = run(tmp_path, 1)
    assert again.returncode == 0 and again.stderr == "", again.stdout + again.stderr
    verified = subprocess.run([sys.executable, "-m", "casino.cli.main", "verify", "--var", str(tmp_path)],
                              capture_output=True, text=True, timeout=120)
    assert verified.returncode == 0 and "every one follows the rules" in verified.stdout, verified.stdout
