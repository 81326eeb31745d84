"""What each service follows from the stream, from a durable consumer of its
own: the shoe, wager and dealer-policy services what other instances of them
append; settlement every coup and wager event, settling each coup as its
result passes; the projections every event, into the read models, verifying
each coup as it settles."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from casino.metrics import Metrics
from casino.projections import KvProjections, Projector, fold_stream
from casino.rules.settlement import CoupSettled
from casino.rules.shoe import RoundStarted
from casino.store import subjects
from casino.store.eventstore import EventStore, Stored
from casino.store.following import Delivery, Following
from casino.store.jetstream import STREAM, JetStreamEventStore
from casino.verify import verify_coup
from services.messaging import PullConsumer, ack, decoded, failed
from services.settlement.service import FOLLOWED, Due, SettlementService

log = logging.getLogger("casino")


CHECKPOINT_EVERY = 1.0  # seconds between the projections' checkpoints, at most


async def projections(nc: Client, store: JetStreamEventStore, metrics: Metrics,
                      ) -> tuple[Projector, PullConsumer, Callable[[], Awaitable[None]]]:
    """Fold the stream into the read models on from the last checkpoint (from
    the first event if there is none), then keep them current from a durable
    consumer that starts where the fold ended, saving a checkpoint at most
    every ``CHECKPOINT_EVERY`` seconds and on stopping: a restart reads only
    what came since. Returned with the projector and the consumer: the last
    checkpoint, to save once the consumer has stopped."""
    kv = await KvProjections(nc.jetstream()).open()
    name = _instance("projections")
    projector = await kv.restore() or Projector()
    written = projector.seq  # the stream sequence up to which every key changed is written
    wrote = False  # whether this instance was the writer at its last write

    async def write(changed: set[tuple[str, str]]) -> bool:
        """The keys changed, where this instance is the writer (the one that
        has just become it writes every key: it wrote none while standing by)."""
        nonlocal written, wrote
        writer = await kv.writing(name, time.time())
        if writer:
            await kv.put(projector, changed if wrote else set(projector.everything()))
            written = projector.seq
        wrote = writer
        projector.forget_ended_shoes()
        return writer

    async def folded(changed: set[tuple[str, str]]) -> None:  # each page written, then checkpointed
        if await write(changed):
            await kv.save(projector)

    async def last_checkpoint() -> None:
        if wrote and written == projector.seq:  # not ahead of the keys (a batch cut short in the middle)
            await kv.save(projector)
        await kv.release()

    await fold_stream(projector, store, folded)
    loop = asyncio.get_running_loop()
    next_save = loop.time() + CHECKPOINT_EVERY
    _gauges(projector, metrics)
    # Each coup's messages from its round's start, verified from memory when it settles.
    following = Following(first=(RoundStarted,))

    async def on_batch(msgs: list[tuple[Msg, Delivery]]) -> None:
        nonlocal next_save
        with metrics.handling.labels("projections").time():
            changed: set[tuple[str, str]] = set()
            settled: list[tuple[str, str]] = []
            for m, at in msgs:
                batch = await decoded(nc, name, m, at, metrics)
                if batch is None:
                    following.forget()
                    continue
                following.take(Stored(at.stream_seq, m.subject, batch), at)
                changed |= projector.apply(m.subject, at.stream_seq, batch)
                settled += [(subjects.tokens(m.subject)[0], e.data.coup_id) for e in batch.events
                            if isinstance(e.data, CoupSettled)]
            if changed:
                writer = await write(changed)
                _gauges(projector, metrics)
                if writer and loop.time() >= next_save:
                    await kv.save(projector)
                    next_save = loop.time() + CHECKPOINT_EVERY
            for table, coup in settled:  # every settled coup is verified as it closes
                await verify_settled(store, table, coup, following.pop(coup), metrics)
            await ack(msgs[-1][0])  # and every delivery before it (ack policy all)

    await nc.jetstream().add_consumer(STREAM, ConsumerConfig(
        name=name, durable_name=name, filter_subject=f"{subjects.EVENTS}.>", deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
        opt_start_seq=projector.seq + 1, inactive_threshold=600.0, ack_policy=AckPolicy.ALL))
    return projector, PullConsumer(name, on_batch), last_checkpoint


async def follow(nc: Client, service: Any, kind: str, metrics: Metrics) -> PullConsumer:
    """Keep the service's state current from a durable consumer of its own
    aggregate's events: what another instance of it appends."""
    aggregate = {"shoe": "shoe", "wager": "wager", "dealer-policy": "coup"}[kind]
    name = _instance(kind)

    async def on_batch(msgs: list[tuple[Msg, Delivery]]) -> None:
        with metrics.handling.labels(kind).time():
            for m, at in msgs:
                batch = await decoded(nc, name, m, at, metrics)
                if batch is not None:
                    await service.observe(m.subject, at.stream_seq, batch)
            await ack(msgs[-1][0])  # and every delivery before it (ack policy all)

    await nc.jetstream().add_consumer(STREAM, ConsumerConfig(
        name=name, durable_name=name, filter_subject=subjects.aggregate_filter(aggregate), deliver_policy=DeliverPolicy.NEW,
        inactive_threshold=600.0, ack_policy=AckPolicy.ALL))
    return PullConsumer(name, on_batch)


async def _ensure_filters(nc: Client, durable: str, filters: list[str]) -> None:
    """Create the durable consumer, or give one declared elsewhere (an older
    release, the cluster's manifests) these filters, keeping its other settings.
    A short ack wait: what a killed instance had in hand comes again within seconds."""
    js = nc.jetstream()
    try:
        config = (await js.consumer_info(STREAM, durable)).config
    except NotFoundError:
        config = ConsumerConfig(durable_name=durable, ack_wait=5.0)
    else:
        if sorted(config.filter_subjects or [config.filter_subject or ""]) == sorted(filters):
            return
    config.filter_subject, config.filter_subjects = None, filters
    await js.add_consumer(STREAM, config)


async def settlement_consumer(nc: Client, service: SettlementService, metrics: Metrics) -> PullConsumer:
    """Settlement follows every coup and wager event from its durable consumer
    and settles each coup as its result passes, the settlements of several
    tables at once (``casino.store.following``: a coup it could not follow
    whole is read back from the stream)."""
    name = "settlement"
    await _ensure_filters(nc, name, [subjects.aggregate_filter(a) for a in FOLLOWED])

    async def settle(m: Msg, at: Delivery, due: Due) -> None:
        try:
            await service.settle(due)
        except Exception as exc:
            with contextlib.suppress(nats.errors.Error, TimeoutError):  # not filed: it comes again after the ack wait
                await failed(nc, name, m, at, exc, metrics)
        else:
            await ack(m)

    async def on_batch(msgs: list[tuple[Msg, Delivery]]) -> None:
        for m, at in msgs:
            with metrics.handling.labels(name).time():
                batch = await decoded(nc, name, m, at, metrics)
                if batch is None:
                    service.following.forget()
                    due = None
                else:
                    due = service.follow(Stored(at.stream_seq, m.subject, batch), at)
            if due is None:
                await ack(m)
            else:
                consumer.later(settle(m, at, due))

    consumer = PullConsumer(name, on_batch)
    return consumer


async def verify_settled(store: EventStore, table: str, coup: str, kept: list[Stored] | None,
                         metrics: Metrics) -> None:
    """Verify a settled coup from the messages kept as they passed; one not
    followed whole, or with a finding, is judged on its record read back from
    the stream (its table's shoes: a round may go on into a new shoe)."""
    findings = verify_coup(kept) if kept is not None else None
    if findings != []:
        metrics.read_back.labels(metrics.service).inc()
        findings = verify_coup(await store.read(subjects.coup_filter(coup, table)))
    metrics.verified.labels(table).inc()
    if findings:
        metrics.verification_failures.labels(table).inc()
        for f in findings:
            log.error("verification: %s event seq %d: %s", f.coup, f.seq, f.what)


def _gauges(projector: Projector, metrics: Metrics) -> None:
    """The floor's figures that only the whole history gives: house net, penetration."""
    for table, takings in projector.takings.items():
        metrics.house_net.labels(table).set(takings.house_net)
    for table, status in projector.table_status.items():
        metrics.coup_open.labels(table).set(1 if status.phase in ("betting", "dealing", "finished") else 0)
        metrics.last_event.labels(table).set(status.last_event_at)
        shoe = projector.shoe_stats.get(status.shoe)
        if shoe is not None:
            metrics.penetration.labels(table).set(shoe.penetration)


def _instance(kind: str) -> str:
    """A consumer of one instance's own: a name nobody else can guess (every
    consumer user may create and pull consumers it names, never ``settlement``:
    casino.natsauth), gone ten idle minutes after the instance."""
    return f"{kind}-{secrets.token_hex(8)}"
