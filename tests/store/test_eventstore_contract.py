"""One contract, two adapters: the in-memory fake and real JetStream."""

from __future__ import annotations

import asyncio
import gc
import types
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import nats
import pytest
from nats.js.api import StoreCompression, StreamSource

from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.shoe import CardDrawn
from casino.store import subjects
from casino.store.envelope import Batch, Envelope, type_of, version_of
from casino.store.eventstore import Conflict, EventStore, InMemoryEventStore
from casino.store.jetstream import (
    SECRETS_STREAM,
    STREAM,
    JetStreamEventStore,
    Undeclared,
    _setting,
    ensure_streams,
    stream_config,
)

pytestmark = pytest.mark.anyio
AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["memory", "jetstream"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[EventStore]:
    if request.param == "memory":
        yield InMemoryEventStore()
        return
    url = request.getfixturevalue("nats_url")
    nc = await nats.connect(url)
    await ensure_streams(nc.jetstream())
    yield JetStreamEventStore(nc)
    await nc.close()


def batch(*events: object, table: str = "T1", shoe: str = "T1-shoe-1", coup: str = "T1-000001") -> Batch:
    return Batch(tuple(
        Envelope(f"e{i}", type_of(e), version_of(type_of(e)), table, shoe, coup, "cmd-1", coup, "test", AT,
                 e)  # type: ignore[arg-type]
        for i, e in enumerate(events)))


DEALT = baccarat_messages.CardDealt("player", "AS", 1, True, None, "000 8.3.1")
COUP = subjects.event("T1", "T1-shoe-1", "T1-000001", "coup")


async def test_an_appended_batch_reads_back_whole_with_its_envelopes(store: EventStore) -> None:
    b = batch(DEALT, baccarat_messages.CountAnnounced("player", 1, "000 8.3.2"))
    ack = await store.append(COUP, b, expected=0, msg_id="m1")
    [got] = await store.read(COUP)
    assert (got.seq, got.subject, got.batch) == (ack.seq, COUP, b)


async def test_a_stale_expected_sequence_is_a_conflict_and_writes_nothing(store: EventStore) -> None:
    first = await store.append(COUP, batch(DEALT), expected=0, msg_id="m1")
    with pytest.raises(Conflict):
        await store.append(COUP, batch(DEALT), expected=0, msg_id="m2")
    assert [m.seq for m in await store.read(COUP)] == [first.seq]


async def test_two_writers_racing_for_one_aggregate_exactly_one_wins(store: EventStore) -> None:
    await store.append(COUP, batch(DEALT), expected=0, msg_id="m0")
    [last] = await store.read(COUP)
    results = await asyncio.gather(
        *(store.append(COUP, batch(DEALT), expected=last.seq, msg_id=f"writer-{i}") for i in range(2)),
        return_exceptions=True)
    assert sorted(type(r).__name__ for r in results) == ["Appended", "Conflict"]
    assert len(await store.read(COUP)) == 2


async def test_a_retried_append_is_written_once(store: EventStore) -> None:
    a = await store.append(COUP, batch(DEALT), expected=0, msg_id="cmd-42")
    b = await store.append(COUP, batch(DEALT), expected=0, msg_id="cmd-42")
    assert (b.seq, b.duplicate, a.duplicate) == (a.seq, True, False)
    assert len(await store.read(COUP)) == 1


async def test_the_guard_covers_every_subject_of_an_aggregate(store: EventStore) -> None:
    guard = subjects.aggregate_filter("shoe", "T1")
    one = subjects.event("T1", "T1-shoe-1", "-", "shoe")
    two = subjects.event("T1", "T1-shoe-1", "T1-000001", "shoe")
    drawn = CardDrawn("T1-shoe-1", "T1-000001", 1, "AS")
    a = await store.append(one, batch(drawn), expected=0, msg_id="s1", guard=guard)
    with pytest.raises(Conflict):  # a writer that missed the message on the other subject
        await store.append(two, batch(drawn), expected=0, msg_id="s2", guard=guard)
    await store.append(two, batch(drawn), expected=a.seq, msg_id="s3", guard=guard)


async def test_one_filter_per_coup_per_table_per_shoe(store: EventStore) -> None:
    writes = [("T1", "T1-shoe-1", "T1-000001", "coup"), ("T1", "T1-shoe-1", "T1-000001", "wager"),
              ("T1", "T1-shoe-1", "T1-000001", "shoe"), ("T1", "T1-shoe-1", "T1-000002", "coup"),
              ("T1", "T1-shoe-2", "T1-000003", "coup"), ("T2", "T2-shoe-1", "T2-000001", "coup")]
    for i, (table, shoe, coup, agg) in enumerate(writes):
        await store.append(subjects.event(table, shoe, coup, agg), batch(DEALT), expected=0, msg_id=f"w{i}")

    async def count(flt: str) -> int:
        return len(await store.read(flt))

    assert await count(subjects.coup_filter("T1-000001")) == 3
    assert await count(subjects.table_filter("T1")) == 5
    assert await count(subjects.shoe_filter("T1", "T1-shoe-1")) == 4
    assert len(await store.read(subjects.table_filter("T1"), after=3)) == 2


async def test_a_read_may_stop_after_a_number_of_messages_and_go_on_from_there(store: EventStore) -> None:
    for i in range(5):
        await store.append(subjects.event("T1", "T1-shoe-1", f"T1-00000{i}", "coup"), batch(DEALT), expected=0,
                           msg_id=f"p{i}")
    whole = await store.read(subjects.table_filter("T1"))
    first = await store.read(subjects.table_filter("T1"), limit=2)
    rest = await store.read(subjects.table_filter("T1"), after=first[-1].seq, limit=10)
    assert [m.seq for m in first + rest] == [m.seq for m in whole] and len(first) == 2


async def test_what_a_read_hands_back_is_held_by_nothing_else(store: EventStore) -> None:
    """A dropped page is freed at once, not when the collector next breaks a
    cycle: a first fold of a long stream, page by page, held every page."""
    for i in range(3):
        await store.append(subjects.event("T1", "T1-shoe-1", f"T1-00000{i}", "coup"), batch(DEALT), expected=0,
                           msg_id=f"h{i}")
    page = await store.read(subjects.table_filter("T1"), limit=2)
    assert len(page) == 2
    assert [r for r in gc.get_referrers(page) if isinstance(r, types.CellType)] == []


async def test_the_first_and_last_messages_on_a_filter_are_found_without_reading_the_history(
        store: EventStore) -> None:
    assert await store.last(subjects.aggregate_filter("coup", "T1")) is None
    assert await store.first(subjects.aggregate_filter("coup", "T1")) is None
    writes = [("T1", "T1-shoe-1", "T1-000001", "coup"), ("T1", "T1-shoe-2", "T1-000002", "coup"),
              ("T1", "T1-shoe-2", "T1-000002", "shoe"), ("T2", "T2-shoe-1", "T2-000001", "coup")]
    for i, (table, shoe, coup, agg) in enumerate(writes):
        await store.append(subjects.event(table, shoe, coup, agg), batch(DEALT, coup=coup), expected=0,
                           msg_id=f"w{i}")
    last = await store.last(subjects.aggregate_filter("coup", "T1"))
    assert last is not None
    [whole] = [m for m in await store.read(subjects.aggregate_filter("coup", "T1")) if m.seq == last.seq]
    assert (last.subject, last.batch, last.msg_id) == (whole.subject, whole.batch, "w1")
    assert await store.last(subjects.aggregate_filter("coup", "T3")) is None
    first = await store.first(subjects.coup_filter("T1-000002", "T1"))
    assert first is not None and (first.subject, first.msg_id) == (subjects.event(*writes[1]), "w1")
    assert first.batch == whole.batch
    assert await store.first(subjects.coup_filter("T1-000003", "T1")) is None


async def test_a_retry_after_the_aggregate_moved_on_is_still_written_once(store: EventStore) -> None:
    a = await store.append(COUP, batch(DEALT), expected=0, msg_id="cmd-1")
    await store.append(COUP, batch(DEALT), expected=a.seq, msg_id="cmd-2")
    retry = await store.append(COUP, batch(DEALT), expected=0, msg_id="cmd-1")
    assert (retry.seq, retry.duplicate) == (a.seq, True)
    assert len(await store.read(COUP)) == 2


async def test_a_read_longer_than_its_stall_limit_goes_on_while_messages_come(
        nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A service reads a table's history at start: however long it is, the read
    ends when the history does, not after a fixed time."""
    from casino.store import jetstream
    from casino.store.envelope import encode

    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        await ensure_streams(js)
        data = encode(batch(CardDrawn("T1-shoe-1", "T1-000001", 0, "AS")))
        subject = subjects.event("T1", "T1-shoe-1", "T1-000001", "shoe")
        count = 30_000
        for start in range(0, count, 1000):
            await asyncio.gather(*(js.publish(subject, data) for _ in range(start, start + 1000)))
        monkeypatch.setattr(jetstream, "READ_STALL", 0.2)
        started = asyncio.get_running_loop().time()
        stored = await JetStreamEventStore(nc).read(subjects.shoe_filter("T1", "T1-shoe-1"))
        assert asyncio.get_running_loop().time() - started > 0.2  # longer than the limit
        assert [m.seq for m in stored] == list(range(1, count + 1))
    finally:
        await nc.close()


async def test_every_stream_is_created_compressed_on_disk(nats_url: str) -> None:
    """A coup's events take about a fifth of the disk compressed; a stream
    created without it would fill a node's volume five times as fast."""
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        await ensure_streams(js)
        for name in (STREAM, SECRETS_STREAM, "CASINO_DLQ"):
            assert (await js.stream_info(name)).config.compression == StoreCompression.S2, name
    finally:
        await nc.close()


async def test_a_stream_that_differs_from_its_declaration_is_refused_and_left_as_it_is(nats_url: str) -> None:
    """Provisioning creates what is missing and changes nothing that exists:
    a stream that differs from its declaration (a limit that would delete the
    record, a source, deletes allowed) is refused by name and setting,
    at provisioning and at a service's start, and keeps its messages."""
    from casino.nats.provision import require_provisioned

    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        await ensure_streams(js)  # as provisioned by the fixture: nothing to do
        for change, setting in ((lambda c: setattr(c, "max_msgs", 100), "max_msgs"),
                                (lambda c: setattr(c, "sources", [StreamSource(name=SECRETS_STREAM)]), "sources"),
                                (lambda c: setattr(c, "deny_delete", False), "deny_delete")):
            await js.delete_stream(STREAM)
            config = stream_config()
            change(config)
            await js.add_stream(config)
            await js.publish(COUP, b"kept")
            for attempt in (ensure_streams(js), require_provisioned(nc)):
                with pytest.raises(Undeclared, match=f"{STREAM} differs from its declaration.*{setting}"):
                    await attempt
            info = await js.stream_info(STREAM)
            assert _setting(setting, getattr(info.config, setting)) == _setting(setting, getattr(config, setting))
            assert (await js.get_last_msg(STREAM, COUP)).data == b"kept"
    finally:
        await nc.close()
