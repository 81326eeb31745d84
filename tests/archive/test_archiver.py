"""The archiver on a real nats-server: ended shoes sealed into the archive,
chained, and removed from the live stream only once sealed, read back and
checked; dealing, service starts and the read models go on without them;
replay, verification and export read the archived shoes as the live ones;
and a crash of the archiver at any step, or kill -9 at any moment, loses
nothing and seals nothing twice."""

from __future__ import annotations

import asyncio
import hashlib
import io
import itertools
import os
import random
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path

import msgspec
import nats
import pytest
from services import runner
from services.archiver import consumer as archiver_consumer
from services.archiver.service import ARCHIVER_DURABLE, ArchiverService
from services.dealer_policy.service import DealerPolicyService
from services.settlement.service import SettlementService
from services.shoe.secrets import MemorySecrets
from services.shoe.service import ShoeService
from services.wager.service import WagerService

from casino.audit import archive
from casino.audit.audits import verify_history, verify_store
from casino.audit.replay import replay_coup
from casino.cli.simulator import Simulator
from casino.config.tables import TableConfig
from casino.protocol import commands
from casino.readmodels import projections as readmodels
from casino.readmodels.projections import KvProjections, checkpointed
from casino.store import envelope, subjects
from casino.store.archive import SealStore
from casino.store.eventstore import InMemoryEventStore, Stored
from casino.store.jetstream import ARCHIVE_STREAM, STREAM, JetStreamEventStore, stream_config
from tests.faults.harness import audit
from tests.faults.test_hostile_commands import LocalPeer
from tests.rules.stacking import blackjack, burn_cards, order
from tests.variants import ruleset_variant

pytestmark = pytest.mark.anyio


def tables(tmp: Path) -> dict[str, TableConfig]:
    """Two blackjack tables dealing from one deck cut at half (a shoe ends
    every round or two) and a baccarat table whose eight decks last the test."""
    one_deck = ruleset_variant(tmp, "blackjack-002-hole-card", decks=1, penetration=0.5)
    return {"T-1": TableConfig(one_deck), "T-2": TableConfig(one_deck), "BAC-1": TableConfig("baccarat-000-methods")}


class Casino:
    """The services in this process, and a simulator dealing through them."""

    def __init__(self, url: str, tables: dict[str, TableConfig]) -> None:
        self.url, self.tables = url, tables
        self.running: list[runner.Running] = []
        self.dealt = 0

    async def start(self, *kinds: str) -> None:
        for kind in kinds or runner.EVERY_KIND:
            self.running.append(await runner.start(kind, self.url, tables=self.tables))

    async def deal(self, nc: nats.NATS, coups: int) -> None:
        await Simulator(nc, self.tables, seed=self.dealt + 3).run(coups)
        self.dealt += coups
        dealer = next(r for r in self.running if r.kind == "dealer-policy")
        await dealer.service.finish_rounds()

    async def archived(self, nc: nats.NATS, shoes: int) -> None:
        """Until at least ``shoes`` shoes of each one-deck table are sealed,
        and every sealed shoe is gone from the live stream (the archiver's
        sweep, asked for: it would come within ``services.archiver.consumer.SWEEP_EVERY``)."""
        archiver = next(r for r in self.running if r.kind == "archiver")

        async def done() -> bool:
            await archiver.service.sweep()
            return all([await sealed_and_removed(nc, t, shoes) for t in ("T-1", "T-2")])

        await until(done)

    async def sealing(self, nc: nats.NATS, shoes: int = 1, everywhere: bool = False) -> None:
        """Dealt on at the one-deck tables (``everywhere``: at every table,
        so that every table deals as many coups), a coup at a time, until
        ``shoes`` shoes of each are sealed and gone from the live stream (a
        shoe is sealed once the next has a coup settled, which a short deal
        may not reach: the shuffle decides)."""
        one_deck = {t: c for t, c in self.tables.items() if t.startswith("T-")}
        archiver = next(r for r in self.running if r.kind == "archiver")
        dealer = next(r for r in self.running if r.kind == "dealer-policy")
        for more in range(20):
            await archiver.service.sweep()
            if all([await sealed_and_removed(nc, t, shoes) for t in one_deck]):
                break
            if everywhere:
                await self.deal(nc, 1)
                continue
            await Simulator(nc, one_deck, seed=100 + more).run(1)
            await dealer.service.finish_rounds()
        await self.archived(nc, shoes)

    async def stop(self) -> None:
        for r in reversed(self.running):
            await r.stop()
        self.running.clear()


async def until(check: Callable[[], Awaitable[bool]], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, "not within the time allowed"
        await asyncio.sleep(0.2)


async def whole(nc: nats.NATS) -> list[Stored]:
    """The history, live and archived, as replay reads it."""
    return await archive.history(nc).read(f"{subjects.EVENTS}.>")


async def live_shoes(nc: nats.NATS, table: str) -> set[str]:
    subjects_ = await JetStreamEventStore(nc).subjects(subjects.table_filter(table))
    return {subjects.tokens(s)[1] for s in subjects_} - {subjects.NO_COUP}


async def sealed_shoes(nc: nats.NATS, table: str) -> list[str]:
    return [k.shoe for k in await SealStore(nc).seals(table)]


def _file(header: archive.Header, seals: list[archive.Sealed]) -> io.BytesIO:
    out = io.BytesIO()
    archive.write_export(out, header, seals)
    out.seek(0)
    return out


def chain_verifies(seals: list[archive.Kept]) -> archive.Report:
    """The table's seals verified as an export file of them is."""
    header = archive.Header(seals[0].table, archive.GENESIS, seals[-1].hash, len(seals))
    return archive.verify_export(_file(header, [archive.Sealed(k.data, k.hash) for k in seals]))[1]


async def test_ended_shoes_are_sealed_removed_and_read_as_ever_while_the_tables_deal_on(
        nats_url: str, tmp_path: Path) -> None:
    casino = Casino(nats_url, tables(tmp_path))
    nc = await nats.connect(nats_url)
    await casino.start()
    try:
        await casino.deal(nc, 12)
        await casino.archived(nc, 2)
        recorded = await whole(nc)
        await casino.stop()
        await casino.start()  # every service starts on the live stream alone
        await casino.deal(nc, 6)
        await casino.archived(nc, 3)
    finally:
        await casino.stop()
    history = await whole(nc)
    assert [m.seq for m in history] == sorted({m.seq for m in history})  # each message once, in order
    assert {m.seq for m in recorded} <= {m.seq for m in history}  # nothing lost
    assert audit(history, casino.tables, casino.dealt) == []  # numbered on without a gap, settled once each
    report = verify_history(history)
    assert report.findings == [] and report.coups == 3 * casino.dealt
    as_read = await verify_store(nc, 2)  # `casino verify`: each table read whole, live and archived
    assert (as_read.coups, as_read.shoes, as_read.findings) == (report.coups, report.shoes, [])
    state = (await nc.jetstream().stream_info(STREAM)).state
    assert state.messages < len(history)  # the live stream holds less than the history
    for table in ("T-1", "T-2"):
        seals = await SealStore(nc).seals(table)
        names = [k.shoe for k in seals]
        assert names == [subjects.shoe_id(table, n) for n in range(1, len(names) + 1)]  # each shoe once, in turn
        assert not set(names) & await live_shoes(nc, table)
        sealed_report = chain_verifies(seals)
        assert sealed_report.findings == [] and sealed_report.shoes == len(seals)
        first = archive.open_seal(archive.Sealed(seals[0].data, seals[0].hash))
        coup = next(subjects.tokens(m.subject)[2] for m in first.messages if m.subject.endswith(".coup"))
        r = replay_coup(await archive.history(nc).read(subjects.coup_filter(coup, table)))  # from the archive
        assert r.settled and r.payouts
        # An audit in three shares (an indexed Job's pods) covers every shoe once, as one would.
        shares = [await archive.verify_archived(SealStore(nc), table, i, 3) for i in range(3)]
        assert sum(r.shoes for r in shares) == len(seals) == sealed_report.shoes
        assert sum(r.coups for r in shares) == sealed_report.coups and not any(r.findings for r in shares)
    await nc.close()
    for share in ("0", "1"):
        audited = subprocess.run([sys.executable, "-m", "casino.cli.main", "verify", "--sealed", "--nats", nats_url,
                                  "--shares", "2"], env={**os.environ, "JOB_COMPLETION_INDEX": share},
                                 capture_output=True, text=True, timeout=120)
        assert audited.returncode == 0 and f"share {share} of 2 of the sealed shoes of 2 tables" in audited.stdout, \
            audited


async def sealed_and_removed(nc: nats.NATS, table: str, at_least: int) -> bool:
    sealed = await sealed_shoes(nc, table)
    return len(sealed) >= at_least and not set(sealed) & await live_shoes(nc, table)


async def dealt_history(url: str, tmp: Path, coups: int) -> Casino:
    """A history dealt with every service but the archiver, the read models checkpointed."""
    casino = Casino(url, tables(tmp))
    nc = await nats.connect(url)
    await casino.start(*(k for k in runner.EVERY_KIND if k != "archiver"))
    try:
        await casino.deal(nc, coups)
        last = (await nc.jetstream().stream_info(STREAM)).state.last_seq
        await until(lambda: _checkpointed(nc, last))
    finally:
        await casino.stop()
        await nc.close()
    return casino


async def _checkpointed(nc: nats.NATS, seq: int) -> bool:
    return await checkpointed(nc.jetstream()) >= seq


class Crash(Exception):
    pass


async def test_a_shoe_is_sealed_once_the_next_has_a_settled_coup_without_a_sweep(
        nats_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The archiver follows each shoe's shuffle and end, not every
    settlement: the next shoe's shuffle has it ask the table again until
    that shoe has a settled coup, and no sweep after the first is needed."""
    monkeypatch.setattr(archiver_consumer, "SWEEP_EVERY", 3600.0)
    casino = Casino(nats_url, tables(tmp_path))
    nc = await nats.connect(nats_url)
    await casino.start()
    try:
        config = (await nc.jetstream().consumer_info(STREAM, ARCHIVER_DURABLE)).config
        assert config.filter_subject == archiver_consumer.ARCHIVER_FILTER == "casino.ev.*.*.-.shoe"
        for _ in range(20):
            await casino.deal(nc, 2)
            if await sealed_and_removed(nc, "T-1", 2) and await sealed_and_removed(nc, "T-2", 2):
                break
        # Within a minute, on a busy machine too: far less than the sweep, an hour away.
        await until(lambda: sealed_and_removed(nc, "T-1", 2))
        await until(lambda: sealed_and_removed(nc, "T-2", 2))
    finally:
        await casino.stop()
    assert verify_history(await whole(nc)).findings == []  # the sealed shoes and the live ones, every coup
    await nc.close()


async def test_a_shoe_sealed_while_the_read_models_are_behind_is_removed_once_they_catch_up_without_a_sweep(
        nats_url: str, tmp_path: Path) -> None:
    """A shoe sealed while the read models' checkpoint (a second apart) is
    not yet past it stays live; the table was then let go of until the next
    shuffle or the sweep, five minutes away, so that a table that stopped
    dealing kept a sealed shoe live. It is asked again until it goes."""
    await dealt_history(nats_url, tmp_path, 10)
    nc = await nats.connect(nats_url)
    behind = True

    async def checkpoint() -> int:
        return 0 if behind else await checkpointed(nc.jetstream())

    service = ArchiverService(nc, checkpoint)
    following = archiver_consumer.ArchiverConsumer(lambda: service, service.metrics)
    latest = await JetStreamEventStore(nc).last(subjects.event("T-1", "*", subjects.NO_COUP, "shoe"))
    assert latest is not None
    in_play = subjects.tokens(latest.subject)[1]
    await following._advance("T-1", in_play, archiver_consumer.AGAIN_FIRST)  # as the shoe's shuffle has it
    sealed = await sealed_shoes(nc, "T-1")
    assert len(sealed) >= 2 and set(sealed) <= await live_shoes(nc, "T-1")  # sealed, every one still live
    assert "T-1" in service.unremoved and "T-1" in following.waiting  # to be asked again, not left to the sweep
    behind = False
    shoe, _, wait = following.waiting["T-1"]
    await following._advance("T-1", shoe, 2 * wait)  # as the asking again has it
    assert await sealed_and_removed(nc, "T-1", len(sealed))
    assert "T-1" not in service.unremoved  # nothing left to remove (the shoe in play may still wait to seal)
    await nc.close()


@pytest.mark.parametrize("at", ["sealing", "sealed", "removing", "removed"])
async def test_an_archiver_crashing_at_any_step_loses_nothing_and_seals_nothing_twice(
        nats_url: str, tmp_path: Path, at: str) -> None:
    casino = await dealt_history(nats_url, tmp_path, 10)
    nc = await nats.connect(nats_url)
    before = await JetStreamEventStore(nc).read(f"{subjects.EVENTS}.>")
    crashes = 0

    async def crash(step: str) -> None:
        nonlocal crashes
        if step == at and crashes < 3:
            crashes += 1
            raise Crash(step)

    for _ in range(3):  # an archiver that crashes at the step, up to three times, each one new
        try:
            await ArchiverService(nc, lambda: checkpointed(nc.jetstream()), step=crash).advance("T-1")
        except Crash:
            continue
        break
    await ArchiverService(nc, lambda: checkpointed(nc.jetstream())).advance("T-1")
    assert crashes >= 1
    names = await sealed_shoes(nc, "T-1")
    assert len(names) >= 2 and len(set(names)) == len(names)
    assert (await nc.jetstream().stream_info(ARCHIVE_STREAM)).state.messages == len(names)
    assert not set(names) & await live_shoes(nc, "T-1")
    history = await whole(nc)
    assert [(m.seq, m.subject, m.msg_id) for m in history] == [(m.seq, m.subject, m.msg_id) for m in before]
    assert audit(history, casino.tables, casino.dealt) == []
    assert chain_verifies(await SealStore(nc).seals("T-1")).findings == []
    await nc.close()


async def test_a_live_stream_of_an_earlier_release_is_sealed_and_kept_whole(nats_url: str, tmp_path: Path) -> None:
    """An earlier release's stream denies purging, and the server cannot
    change that: its shoes are sealed, nothing is removed, and it is said."""
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await js.delete_stream(STREAM)
    earlier = stream_config()
    earlier.deny_purge = True
    await js.add_stream(earlier)
    await dealt_history(nats_url, tmp_path, 10)
    before = await JetStreamEventStore(nc).read(f"{subjects.EVENTS}.>")
    archiver = ArchiverService(nc, lambda: checkpointed(js))
    assert await archiver.advance("T-1") >= 2
    assert archiver.removal_denied
    assert archiver.metrics.archive_failures.labels("T-1", "removal")._value.get() == 1
    assert await JetStreamEventStore(nc).read(f"{subjects.EVENTS}.>") == before
    assert chain_verifies(await SealStore(nc).seals("T-1")).findings == []
    await nc.close()


async def test_kill_minus_nine_of_the_archiver_at_any_moment_loses_nothing_and_seals_nothing_twice(
        nats_url: str, tmp_path: Path) -> None:
    kills = int(os.environ.get("CASINO_SOAK_KILLS", "6"))
    casino = await dealt_history(nats_url, tmp_path, 24)
    nc = await nats.connect(nats_url)
    before = await JetStreamEventStore(nc).read(f"{subjects.EVENTS}.>")
    rnd = random.Random(int.from_bytes(os.urandom(2), "big"))
    log = (tmp_path / "archiver.log").open("ab")
    cmd = [sys.executable, "-m", "services.archiver", "--nats", nats_url]
    progress = []
    for _ in range(kills):
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        started = time.monotonic()
        count = len(await SealStore(nc).seals("T-1")) + len(await SealStore(nc).seals("T-2"))
        while time.monotonic() < started + 20:  # killed once it has begun sealing, at a random moment
            now = len(await SealStore(nc).seals("T-1")) + len(await SealStore(nc).seals("T-2"))
            if now > count:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(rnd.uniform(0.0, 0.05))
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        progress.append(now - count)
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        for table in ("T-1", "T-2"):
            await until(lambda t=table: _all_sealed(nc, t))
    finally:
        p.terminate()
        p.wait(10)
    assert any(progress), "no kill landed while it was sealing: the test would prove nothing"
    for table in ("T-1", "T-2"):
        names = await sealed_shoes(nc, table)
        assert len(set(names)) == len(names) >= 2
        assert not set(names) & await live_shoes(nc, table)
        assert chain_verifies(await SealStore(nc).seals(table)).findings == []
    seals = [k.shoe for t in ("T-1", "T-2") for k in await SealStore(nc).seals(t)]
    assert (await nc.jetstream().stream_info(ARCHIVE_STREAM)).state.messages == len(seals)
    history = await whole(nc)
    assert [(m.seq, m.subject, m.msg_id) for m in history] == [(m.seq, m.subject, m.msg_id) for m in before]
    assert audit(history, casino.tables, casino.dealt) == []
    await nc.close()


async def _all_sealed(nc: nats.NATS, table: str) -> bool:
    """Every shoe that may be sealed is sealed and removed: what is live is the
    shoe in play and, until that shoe has settled a coup, the one before it."""
    live = sorted(subjects.shoe_number(table, s) or 0 for s in await live_shoes(nc, table))
    if not live or len(live) > 2 or len(await sealed_shoes(nc, table)) != live[0] - 1:
        return False
    settled = subjects.event(table, subjects.shoe_id(table, live[0] + 1), "*", "settle")
    return len(live) == 1 or await JetStreamEventStore(nc).first(settled) is None


# ---- export files ----------------------------------------------------------------


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[archive.Header, list[archive.Sealed]]:
    """Table T-1's sealed shoes as ``casino export`` writes them, from a casino
    that dealt with its archiver running."""
    import anyio

    from tests.natsfixture import nats_server

    async def deal(url: str) -> tuple[archive.Header, list[archive.Sealed]]:
        casino = Casino(url, tables(tmp_path_factory.mktemp("rulesets")))
        nc = await nats.connect(url)
        await casino.start()
        try:
            await casino.deal(nc, 12)
            await casino.archived(nc, 2)
            return await archive.export_table(SealStore(nc), "T-1")
        finally:
            await casino.stop()
            await nc.close()

    with nats_server(tmp_path_factory.mktemp("nats")) as url:
        return anyio.run(deal, url)


def test_an_export_of_sealed_shoes_verifies_with_no_server(exported: tuple[archive.Header, list[archive.Sealed]]) -> None:
    header, seals = exported
    assert len(seals) >= 2  # the one-deck table ends a shoe every round or two: a chain to verify
    opened = [archive.open_seal(s) for s in seals]
    coups = {subjects.tokens(m.subject)[2] for s in opened for m in s.messages if m.subject.endswith(".coup")}
    _, report = archive.verify_export(_file(header, seals))
    assert report.findings == [] and report.shoes == len(seals) and report.coups == len(coups)
    whole = sum(len(envelope.encode(m.batch)) for s in opened for m in s.stored())
    assert sum(len(s.data) for s in seals) * 2 < whole  # compressed


@pytest.mark.parametrize("change", ["removed", "reordered", "altered", "cut short"])
def test_a_shoe_removed_reordered_altered_or_cut_from_an_export_is_found(exported: tuple[archive.Header, list[archive.Sealed]], change: str) -> None:
    header, seals = exported
    assert len(seals) >= 2  # the shuffles are random: two shoes at least, not always three
    # Two shoes reordered end with another seal than the header's: refused as cut short or replaced.
    said = "cut short" if change == "cut short" or (change == "reordered" and len(seals) == 2) else "chained to"
    if change == "removed":  # the first: the next one is chained to it
        seals = seals[1:]
    elif change == "reordered":
        seals = [seals[1], seals[0], *seals[2:]]
    elif change == "altered":  # a card of the first shoe changed, sealed again as it was chained
        first = archive.open_seal(seals[0])
        msgs = [msgspec.structs.replace(m, batch=m.batch.replace(b'"card":"', b'"card":"X', 1)) for m in first.messages]
        data = zlib.compress(msgspec.msgpack.encode(msgspec.structs.replace(first, messages=tuple(msgs))))
        seals = [archive.Sealed(data, hashlib.sha256(data).hexdigest()), *seals[1:]]
    else:
        seals = seals[:-1]
    header = msgspec.structs.replace(header, seals=len(seals))
    with pytest.raises(archive.ArchiveError) as refused:
        archive.verify_export(_file(header, seals))
    assert said in str(refused.value)


def test_casino_verify_file_reads_no_server_and_fails_on_a_difference(exported: tuple[archive.Header, list[archive.Sealed]], tmp_path: Path) -> None:
    header, seals = exported
    good, bad = tmp_path / "T-1.export", tmp_path / "T-1-bad.export"
    good.write_bytes(_file(header, seals).getvalue())
    bad.write_bytes(_file(msgspec.structs.replace(header, seals=len(seals) - 1), seals[1:]).getvalue())
    verify = [sys.executable, "-m", "casino.cli.main", "verify", "--nats", "nats://127.0.0.1:1", "--file"]
    ok = subprocess.run([*verify, str(good), "--expect", seals[-1].hash], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and f"and {len(seals)} ended shoes: every one follows the rules" in ok.stdout, ok
    refused = subprocess.run([*verify, str(bad)], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "chained to" in refused.stderr, refused


def test_each_sealed_shoe_alone_verifies_chained_from_the_one_before(exported: tuple[archive.Header, list[archive.Sealed]]) -> None:
    # An export of a window: one shoe, chained to the seal before it (a round gone on into
    # the next shoe is sealed whole with the shoe it was opened from).
    _, seals = exported
    previous = archive.GENESIS
    for sealed in seals:
        _, report = archive.verify_export(_file(archive.Header("T-1", previous, sealed.hash, 1), [sealed]))
        assert report.findings == [] and report.shoes == 1, archive.open_seal(sealed).shoe
        previous = sealed.hash


def _rechained(opened: list[archive.Seal], previous: str = archive.GENESIS) -> list[archive.Sealed]:
    """Seals made again from ``opened``, chained anew: what anyone can do with
    a file, since a hash chain holds no secret."""
    out = []
    for seal in opened:
        data = zlib.compress(msgspec.msgpack.encode(msgspec.structs.replace(seal, previous=previous)))
        out.append(archive.Sealed(data, hashlib.sha256(data).hexdigest()))
        previous = out[-1].hash
    return out


def _export(header: archive.Header, seals: list[archive.Sealed]) -> bytes:
    return _file(msgspec.structs.replace(header, last=seals[-1].hash, seals=len(seals)), seals).getvalue()


def _without_coup(seal: archive.Seal, coup: str, aggregates: tuple[str, ...]) -> archive.Seal:
    return msgspec.structs.replace(seal, messages=tuple(
        m for m in seal.messages if not (subjects.tokens(m.subject)[2] == coup
                                          and subjects.tokens(m.subject)[3] in aggregates)))


def _bomb() -> bytes:
    """One seal of 270 KiB that inflates to 272 MiB of zeros."""
    squeeze = zlib.compressobj(9)
    data = b"".join(squeeze.compress(bytes(16 * 2**20)) for _ in range(17)) + squeeze.flush()
    return archive.FILE_MAGIC + b"".join(len(r).to_bytes(8, "big") + r for r in (
        msgspec.json.encode(archive.Header("T-1", archive.GENESIS, hashlib.sha256(data).hexdigest(), 1)), data))


def forged(change: str, header: archive.Header, seals: list[archive.Sealed]) -> bytes:
    opened = [archive.open_seal(s) for s in seals]
    coups = sorted({subjects.tokens(m.subject)[2] for s in opened for m in s.messages if m.subject.endswith(".coup")})
    middle = coups[len(coups) // 2]
    holding = next(i for i, s in enumerate(opened) if any(subjects.tokens(m.subject)[2] == middle for m in s.messages))
    if change == "empty":
        return b""
    if change == "no seal":
        return _file(archive.Header("T-1", archive.GENESIS, archive.GENESIS, 0), []).getvalue()
    if change == "inflates to 272 MiB":
        return _bomb()
    if change == "a record of 2**63 bytes":
        return archive.FILE_MAGIC + (2**63).to_bytes(8, "big") + b"x"
    if change == "a header nested deep":
        deep = b"[" * 100_000 + b"]" * 100_000
        return archive.FILE_MAGIC + len(deep).to_bytes(8, "big") + deep
    if change == "a batch nested deep":
        first = opened[0]
        deep = archive.Message(first.messages[0].seq, first.messages[0].subject, "x", b"[" * 100_000 + b"]" * 100_000)
        return _export(header, _rechained([msgspec.structs.replace(first, messages=(deep, *first.messages[1:])),
                                           *opened[1:]]))
    if change == "the first shoe dropped, the chain re-linked":
        return _export(header, _rechained(opened[1:]))
    if change == "a coup's settlement cut out":
        opened[holding] = _without_coup(opened[holding], middle, ("settle",))
        return _export(header, _rechained(opened))
    if change == "a coup cut out whole":
        opened[holding] = _without_coup(opened[holding], middle, ("coup", "wager", "settle"))
        return _export(header, _rechained(opened))
    if change == "the table relabelled":
        relabelled = [msgspec.structs.replace(s, table="T-9") for s in opened]
        return _export(msgspec.structs.replace(header, table="T-9"), _rechained(relabelled))
    raise AssertionError(change)


@pytest.mark.parametrize("change", ["empty", "no seal", "inflates to 272 MiB", "a record of 2**63 bytes",
                                    "a header nested deep",
                                    "the first shoe dropped, the chain re-linked", "a coup's settlement cut out",
                                    "a coup cut out whole", "the table relabelled"])
def test_a_malformed_or_forged_export_is_refused_in_one_line(
        exported: tuple[archive.Header, list[archive.Sealed]], tmp_path: Path, change: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    from casino.cli.replay import verify_file

    header, seals = exported
    path = tmp_path / "forged.export"
    path.write_bytes(forged(change, header, seals))
    assert verify_file(str(path)) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"casino: {path}: ") and err.count("\n") == 1, (out, err)
    if change == "inflates to 272 MiB":  # stopped at the bound, not inflated whole and found unreadable
        assert "inflates past 256 MiB" in err, err


def test_a_sealed_message_that_cannot_be_read_is_a_finding_never_a_crash(
        exported: tuple[archive.Header, list[archive.Sealed]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A seal keeps a message as stored, one that cannot be read included (the
    archiver seals around it): verifying the file names it as a finding,
    exit 1, whatever it holds (a batch nested a hundred thousand deep)."""
    from casino.cli.replay import verify_file

    header, seals = exported
    path = tmp_path / "deep.export"
    path.write_bytes(forged("a batch nested deep", header, seals))
    assert verify_file(str(path)) == 1
    out, err = capsys.readouterr()
    first = archive.open_seal(seals[0]).messages[0]
    assert f"event seq {first.seq}: message seq {first.seq} cannot be read" in out and err == "", (out, err)


def test_an_export_is_anchored_to_the_last_seal_the_casino_holds(
        exported: tuple[archive.Header, list[archive.Sealed]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A chain proves only that it is a chain: re-sealed and re-chained with a
    shoe left out it verifies, so verify prints the last seal's hash, and
    refuses a file whose chain does not end at the hash it is given. Without
    a hash to end at, a consistent file, the casino's or re-chained, is said
    to be not proven, with an exit status of its own: a regulator's script
    tells it from a proof (0) and from a difference (1)."""
    from casino.cli.replay import UNANCHORED, verify_file

    header, seals = exported
    good, cut = tmp_path / "T-1.export", tmp_path / "T-1-cut.export"
    good.write_bytes(_file(header, seals).getvalue())
    cut.write_bytes(_export(header, _rechained([archive.open_seal(s) for s in seals[:-1]])))
    assert verify_file(str(good), seals[-1].hash) == 0 and "(as expected)" in capsys.readouterr().out
    for unanchored in (good, cut):  # a shorter chain is still a chain
        assert verify_file(str(unanchored)) == UNANCHORED != 0
        out = capsys.readouterr().out
        assert "every one follows the rules" in out and "not proven to be the casino's record" in out, out
        assert "(as expected)" not in out
    assert verify_file(str(cut), seals[-1].hash) == 1
    assert f"not at {seals[-1].hash}" in capsys.readouterr().err


async def test_a_consumer_holding_a_delivery_unacknowledged_does_not_stall_the_archive(
        nats_url: str, tmp_path: Path) -> None:
    """A consumer any consuming user can make (here one that receives every
    event and never acknowledges one) held the removal of every sealed shoe
    while it lived: only settlement's consumer and the read models'
    checkpoint hold a removal up."""
    casino = Casino(nats_url, tables(tmp_path))
    nc = await nats.connect(nats_url)
    hostile = await nats.connect(nats_url)
    held = await hostile.jetstream().subscribe(f"{subjects.EVENTS}.>", durable="holds-everything", manual_ack=True)
    await casino.start()
    try:
        await casino.deal(nc, 12)
        await casino.archived(nc, 2)  # sealed and removed though the consumer holds its deliveries
        info = await hostile.jetstream().consumer_info(STREAM, "holds-everything")
        assert info.num_ack_pending > 0 and info.num_redelivered == 0  # still held, none of it acknowledged
    finally:
        await held.unsubscribe()
        await hostile.close()
        await casino.stop()
        await nc.close()


@pytest.mark.parametrize("junk", ["bytes", "an event of the shoe's again"])
async def test_a_stray_shoe_message_under_a_sealed_shoe_does_not_stop_the_table(
        nats_url: str, tmp_path: Path, junk: str) -> None:
    """A message written under a shoe already sealed and removed (by whoever
    holds the shoe service's credential, or a fault) made the table's shoe in
    play look like that shoe: the table refused every coup after. The table
    deals on, and every service restarted finds its shoe in play."""
    casino = Casino(nats_url, tables(tmp_path))
    nc = await nats.connect(nats_url)
    await casino.start()
    try:
        await casino.deal(nc, 12)
        await casino.sealing(nc, 2, everywhere=True)
        sealed = (await SealStore(nc).seals("T-1"))[0]
        first = archive.open_seal(archive.Sealed(sealed.data, sealed.hash))
        own = [m for m in first.messages if subjects.tokens(m.subject)[1] == first.shoe]
        subject = next(m.subject for m in own if subjects.tokens(m.subject)[2] == subjects.NO_COUP)
        await nc.jetstream().publish(subject, b"junk" if junk == "bytes" else own[-1].batch)
        await casino.deal(nc, 3)
        await casino.stop()
        await casino.start()  # and from a restart
        await casino.deal(nc, 3)
        await casino.sealing(nc, 3, everywhere=True)
    finally:
        await casino.stop()
    await nc.jetstream().purge_stream(STREAM, subject=subject)  # the stray message, to read the history as recorded
    history = await whole(nc)
    await nc.close()
    assert audit(history, casino.tables, casino.dealt) == []
    assert verify_history(history).findings == []
    shoes = [subjects.tokens(m.subject)[1] for m in history if subjects.tokens(m.subject)[0] == "T-1"
             for e in m.batch.events if type(e.data).__name__ == "ShoeShuffled"]
    assert len(shoes) == len(set(shoes)), shoes  # no shoe shuffled twice


async def test_read_models_folded_with_no_checkpoint_to_take_fold_the_sealed_shoes_too(
        nats_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A projections service that finds no checkpoint it can take (a release
    whose fold differs, or read models lost) folds the whole history, the
    archive's sealed shoes and then the live stream, not the live stream
    alone: the read models come out as they were."""
    casino = Casino(nats_url, tables(tmp_path))
    await casino.start()
    nc = await nats.connect(nats_url)
    try:
        await casino.deal(nc, 6)
        await casino.sealing(nc)
        kv = await KvProjections(nc.jetstream()).open()
        last = (await JetStreamEventStore(nc).last(f"{subjects.EVENTS}.>"))
        assert last is not None
        await until(lambda: _at_least(kv, last.seq))
        before = {k: v for k, v in (await kv.everything_listed()).items() if k[0] in ("takings", "table_status")}
        projections_ = next(r for r in casino.running if r.kind == "projections")
        await projections_.stop()
        casino.running.remove(projections_)
        monkeypatch.setattr(readmodels, "FOLD_VERSION", readmodels.FOLD_VERSION + 1)  # the checkpoint is not taken
        await casino.start("projections")
        await until(lambda: _at_least(kv, last.seq))
        await until(lambda: _equal_to(kv, before))
    finally:
        await nc.close()
        await casino.stop()


async def _at_least(kv: KvProjections, seq: int) -> bool:
    return await kv.seq() >= seq


async def _equal_to(kv: KvProjections, before: dict[tuple[str, str], bytes]) -> bool:
    return {k: v for k, v in (await kv.everything_listed()).items() if k in before} == before


def test_a_round_carried_into_the_next_shoe_leaves_no_coup_in_play_in_that_shoes_seal(tmp_path: Path) -> None:
    """003 7.9: the cut card out as the first card of a round, the shoe is
    reshuffled at once and the round dealt from the next shoe. The coup's
    record stays under the shoe it opened from, which is sealed with the
    coup's messages under the next shoe (``archive.continued``); the next
    shoe holds only the shoe's side of that round. Each shoe sealed as the
    archiver seals it verifies alone: no coup is left in play in the next
    shoe's seal, though a later coup opened there."""
    ruleset = ruleset_variant(tmp_path, "blackjack-003-no-hole-card", decks=1, penetration=0.4)  # a round's first card is the cut card
    config = {"J": TableConfig(ruleset)}

    async def dealt() -> list[Stored]:
        store, peer = InMemoryEventStore(), LocalPeer()
        stacked = order(1, [], burn_cards(blackjack(ruleset).shoe))  # every shoe alike: the same rounds
        shoe = ShoeService(store, MemorySecrets(), shuffle=lambda table, decks: (stacked, "salt"))
        wager, dealer = WagerService(store), DealerPolicyService(store, peer, config)  # type: ignore[arg-type]
        peer.routes = {"shoe": (commands.shoe_decoder, shoe.handle, shoe.reload),
                       "wager": (commands.wager_decoder, wager.handle, wager.reload),
                       "book": (commands.book_decoder, wager.handle, wager.reload),
                       "coup": (commands.coup_decoder, dealer.handle, dealer.reload)}
        for n in range(1, 25):
            reply = await peer.ask("casino.cmd.J.coup", commands.OpenCoup(id=f"o{n}", table="J", number=n))
            assert reply.ok, reply
            assert (await peer.ask("casino.cmd.J.wager", commands.PlaceWager(
                id=f"w{n}", table="J", coup=reply.coup, seat=1, bet="box", amount=5000))).ok
            reply = await peer.ask("casino.cmd.J.coup", commands.CloseBetting(id=f"c{n}", table="J", coup=reply.coup))
            while reply.waiting is not None and reply.waiting.kind == "decision":
                reply = await peer.ask("casino.cmd.J.coup", commands.Decide(
                    id=f"d{n}", table="J", coup=reply.coup, seat=1, hand=0, action="stand"))
            await dealer.finish_rounds()
        settlement = SettlementService(store)
        for m in await store.read(subjects.table_filter("J")):
            await settlement.on_coup_events(m)
        return await store.read(f"{subjects.EVENTS}.>")

    stored = asyncio.run(dealt())
    shoes = sorted({subjects.tokens(m.subject)[1] for m in stored} - {subjects.NO_COUP},
                   key=lambda s: subjects.shoe_number("J", s) or 0)
    carried = [c for s in shoes for c in archive.continued([m for m in stored if subjects.tokens(m.subject)[1] == s])]
    assert carried, "no round went on into the next shoe: the test would prove nothing"
    rulesets = [m for m in stored if subjects.tokens(m.subject)[3] == "ruleset"]
    sealed = 0
    for shoe, after in itertools.pairwise(shoes):
        own = [m for m in stored if subjects.tokens(m.subject)[1] == shoe]
        if not archive.sealable(own):
            continue
        later = [m for m in stored if subjects.tokens(m.subject)[1] == after
                 and subjects.tokens(m.subject)[2] in archive.continued(own)]
        seal = archive.seal_shoe("J", shoe, archive.GENESIS, own, later, rulesets)
        assert verify_history(archive.open_seal(seal.sealed).stored()).findings == [], shoe
        sealed += 1
    assert sealed >= 2
