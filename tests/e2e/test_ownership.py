"""Instances that share the tables: every table's commands reach one
instance of each service, which alone holds the table; a new instance takes
its share, and a stopped or vanished one's tables move to the others."""

from __future__ import annotations

import asyncio
import string
from datetime import UTC, datetime, timedelta

import nats
import pytest
from services import followers, ownership, runner
from services.archiver.consumer import ArchiverConsumer
from services.ownership import LAPSE, Assignment, lapsed, read_assignment, rebalance

from casino.config.tables import TableConfig
from casino.nats.partitions import PARTITIONS, partition
from casino.protocol import commands
from casino.protocol.service import Peer
from casino.store import subjects
from tests.e2e.casino import Casino
from tests.natsfixture import provisioned

pytestmark = pytest.mark.anyio


def loads(a: Assignment) -> dict[str, int]:
    return {m: a.owners.count(m) for m in set(a.owners)}


def test_one_instance_owns_every_partition_and_more_share_them_evenly() -> None:
    a = rebalance(Assignment(), ["a"])
    assert a.owners == ["a"] * PARTITIONS
    b = rebalance(a, ["a", "b"])
    assert loads(b) == {"a": PARTITIONS // 2, "b": PARTITIONS // 2}
    c = rebalance(b, ["a", "b", "c"])
    assert sorted(loads(c).values()) == [5, 5, 6]
    # Only what the newcomer takes moves.
    assert sum(x != y for x, y in zip(b.owners, c.owners, strict=True)) == c.owners.count("c")


def test_a_lapsed_or_leaving_instances_partitions_go_to_the_live_and_a_forged_assignment_is_undone() -> None:
    a = rebalance(rebalance(Assignment(), ["a"]), ["a", "b"])
    assert rebalance(a, ["a", "b"]) == a  # nothing to write
    assert rebalance(a, ["b"]).owners == ["b"] * PARTITIONS  # a lapsed, or left
    assert rebalance(Assignment(), []).owners == [""] * PARTITIONS
    ghost = Assignment(["ghost"] * PARTITIONS)  # every partition to an instance the server does not hold
    assert loads(rebalance(ghost, ["a", "b"])) == {"a": PARTITIONS // 2, "b": PARTITIONS // 2}
    for junk in (b"\x00\xff not json", b'{"owners": ["a"]}', b'{"owners": 7}', b'{"members": {"x": 1e12}}'):
        assert read_assignment(junk) == Assignment()  # no assignment: written anew, never fatal


def test_a_membership_lapses_by_the_servers_clock() -> None:
    written = datetime(2026, 12, 4, 12, 0, 0, tzinfo=UTC)
    assert not lapsed(written, written + timedelta(seconds=LAPSE - 0.5))
    assert lapsed(written, written + timedelta(seconds=LAPSE + 0.5))


async def test_the_server_maps_each_tables_commands_to_the_partition_the_services_compute(nats_url: str) -> None:
    tables = sorted({"T1", "BAC000-1", "-", *(f"{c}{n}" for c in string.ascii_uppercase for n in range(8))})
    nc = await nats.connect(nats_url)
    got: dict[str, str] = {}
    done = asyncio.Event()

    async def seen(msg: nats.aio.msg.Msg) -> None:
        got[msg.subject.split(".")[2]] = msg.subject.split(".")[-1]
        if len(got) == len(tables):
            done.set()

    await nc.subscribe("casino.cmd.*.coup.*", cb=seen)
    await nc.flush()
    for table in tables:
        await nc.publish(subjects.command(table, "coup"), b"{}")
    await asyncio.wait_for(done.wait(), 10)
    await nc.close()
    assert got == {t: str(partition(t)) for t in tables}
    assert len(set(got.values())) == PARTITIONS  # every partition in use among these tables


def _tables(count: int) -> dict[str, TableConfig]:
    return {f"T{i}": TableConfig(ruleset="baccarat-000-methods") for i in range(count)}


async def _deal(casino: Casino, tables: list[str]) -> None:
    for table in tables:
        reply = await casino.patiently(table, "coup", commands.OpenCoup)
        assert reply.ok, reply
        placed = await casino.patiently(table, "wager", commands.PlaceWager, coup=reply.coup, seat=1, bet="banker",
                                        amount=5000)
        assert placed.ok, placed
        reply = await casino.patiently(table, "coup", commands.CloseBetting, coup=reply.coup)
        assert reply.ok and reply.waiting is not None and reply.waiting.kind == "finished", reply


async def _shares(instances: list[runner.Running], share: int) -> None:
    """Wait (up to 20 s: a tick or two, on a busy machine more) until each of ``instances`` owns ``share`` partitions."""
    for _ in range(100):
        if all(r.ownership is not None and len(r.ownership.owned) == share for r in instances):
            return
        await asyncio.sleep(0.2)
    raise AssertionError([len(r.ownership.owned) if r.ownership else None for r in instances])


def _holders(casino: Casino, kind: str, table: str) -> list[int]:
    return [k for k, r in enumerate(r for r in casino.running if r.kind == kind) if table in r.service.tables]


async def test_each_table_is_held_by_the_one_instance_that_owns_it_and_moves_when_it_stops(nats_url: str) -> None:
    await provisioned(nats_url)
    tables = _tables(12)
    async with Casino(nats_url, tables) as casino:
        await casino.start("dealer-policy")
        await casino.start("shoe")
        first = [r for r in casino.running if r.kind == "dealer-policy"]
        await _shares(first, PARTITIONS // 2)  # the second takes its share within a tick or two
        await _shares([r for r in casino.running if r.kind == "shoe"], PARTITIONS // 2)
        await _deal(casino, list(tables))
        for table in tables:  # held by its owner, and by no other instance
            for kind in ("dealer-policy", "shoe"):
                instances = [r for r in casino.running if r.kind == kind]
                owner = next(k for k, r in enumerate(instances) if r.ownership and partition(table) in r.ownership.owned)
                assert _holders(casino, kind, table) == [owner], (kind, table)
        served = [r.metrics.registry.get_sample_value("casino_command_seconds_count", {"service": "dealer-policy"})
                  for r in first]
        assert all(n and n > 0 for n in served), served  # both answered commands
        # One stops: its tables move to the other, which deals on from the stream.
        await casino.stop("dealer-policy")
        await _shares([casino.service("dealer-policy")], PARTITIONS)
        await _deal(casino, list(tables))
        numbers = {t: (await casino.ask(t, "coup", commands.Status)).coup for t in tables}
        assert numbers == {t: f"{t}-000002" for t in tables}


async def test_a_killed_instances_tables_move_once_its_membership_lapses(nats_url: str) -> None:
    await provisioned(nats_url)
    tables = _tables(6)
    async with Casino(nats_url, tables) as casino:
        second = await casino.start("wager")
        await _shares([casino.service("wager"), second], PARTITIONS // 2)
        assert second.ownership is not None
        # Gone without a word (its renewals stop; its subscriptions with its connection).
        await second.ownership.stop()
        assert second.commands is not None
        await second.commands.release(set(second.ownership.owned))
        casino.running.remove(second)
        casino.peer = Peer(casino.nc, timeout=5, attempts=40)  # a terminal asks again until answered
        started = asyncio.get_running_loop().time()
        await _deal(casino, list(tables))  # waits on the tables it owned, asked again until answered
        took = asyncio.get_running_loop().time() - started
        remaining = casino.service("wager")
        assert remaining.ownership is not None and len(remaining.ownership.owned) == PARTITIONS
        assert took < LAPSE + 5 * ownership.TICK + 10  # within seconds
        await second.stop()


def _sample(r: runner.Running, name: str) -> float:
    return r.metrics.registry.get_sample_value(name, {"service": "settlement"}) or 0.0


async def test_one_settlement_instance_at_a_time_follows_the_coups_whole_and_another_takes_over_as_it_stops(
        nats_url: str) -> None:
    """Two settlement instances: the owner of partition SOLE takes every
    delivery and settles each coup from what it followed (none read back);
    the other stands by, and settles once the first has stopped."""
    await provisioned(nats_url)
    tables = _tables(6)
    async with Casino(nats_url, tables) as casino:
        await casino.start("settlement")
        pair = [r for r in casino.running if r.kind == "settlement"]
        await _shares(pair, PARTITIONS // 2)
        await _deal(casino, list(tables))
        for table in tables:
            await casino.settled(f"{table}-000001")
        [settling] = [r for r in pair if r.ownership and followers.SOLE in r.ownership.owned]
        [standing_by] = [r for r in pair if r is not settling]
        assert _sample(settling, "casino_event_handling_seconds_count") > 0
        assert _sample(standing_by, "casino_event_handling_seconds_count") == 0
        assert [_sample(r, "casino_coups_read_back_total") for r in pair] == [0, 0]
        casino.running.remove(settling)
        await settling.stop()
        await _shares([standing_by], PARTITIONS)
        await _deal(casino, list(tables))
        for table in tables:
            await casino.settled(f"{table}-000002")
        assert _sample(standing_by, "casino_event_handling_seconds_count") > 0


async def test_one_archiver_at_a_time_takes_the_settlements_and_sweeps_and_another_takes_over_as_it_stops(
        nats_url: str) -> None:
    await provisioned(nats_url)
    async with Casino(nats_url, _tables(2)) as casino:
        pair = [await casino.start("archiver"), await casino.start("archiver")]
        await _shares(pair, PARTITIONS // 2)
        [sole] = [r for r in pair if r.ownership and followers.SOLE in r.ownership.owned]
        [other] = [r for r in pair if r is not sole]
        assert isinstance(sole.sole, ArchiverConsumer) and isinstance(other.sole, ArchiverConsumer)
        assert sole.sole.subscription is not None and sole.sole.sweeping is not None
        assert other.sole.subscription is None and other.sole.sweeping is None
        casino.running.remove(sole)
        await sole.stop()
        await _shares([other], PARTITIONS)
        assert other.sole.subscription is not None and other.sole.sweeping is not None
