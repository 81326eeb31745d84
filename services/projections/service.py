"""The projections service: the read models, kept current from the stream,
and every coup verified as it settles."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

from faststream.nats import NatsBroker
from nats.js.api import ConsumerConfig, DeliverPolicy

from casino.audit.verify import verify_coup
from casino.metrics import Metrics
from casino.protocol.service import log
from casino.readmodels.projections import KvProjections, Projector, fold_stream
from casino.rules.settlement import CoupSettled
from casino.rules.shoe import RoundStarted
from casino.store import envelope, subjects
from casino.store.envelope import CoupConfigured
from casino.store.eventstore import EventStore, Stored
from casino.store.following import Following
from services.followers import ACK_EVERY, Acks, claim, events_subscriber, own_consumer
from services.messaging import decoded, delivery, documented

CHECKPOINT_EVERY = 1.0  # seconds between the projections' checkpoints, at most


class Projections:
    """The read models, folded from the stream on from the last checkpoint
    (from the first event if there is none), then kept current from a durable
    consumer of this instance's own that starts where the fold ended, saving a
    checkpoint at most every ``CHECKPOINT_EVERY`` seconds and on stopping: a
    restart reads only what came since. One instance at a time writes the
    keys (``KvProjections.writing``); the others stand by, folding."""

    def __init__(self, broker: NatsBroker, metrics: Metrics) -> None:
        self.broker, self.metrics = broker, metrics
        self.name = ""  # the consumer of its own, claimed once the fold at start has ended
        self.instance = f"projections-{secrets.token_hex(8)}"  # who holds the writer's lease
        self.projector = Projector()
        self.kv: KvProjections | None = None
        self.store: EventStore | None = None
        self.written = 0  # the stream sequence up to which every key changed is written
        self.wrote = False  # whether this instance was the writer at its last write
        self.changed: set[tuple[str, str]] = set()
        self.next_save = 0.0
        self.saved = 0  # the stream sequence the last checkpoint saved covers
        self.opened = False  # folded at start: from then on, an instance becoming the writer takes over
        # Each coup's messages from its round's start, verified from memory when it settles.
        # A coup's first message: its round started, or its opening where the shoe started its round
        # as the last one ended, in a message of the coup before (docs/clauses.md, "The next round").
        self.following = Following(first=(RoundStarted, CoupConfigured))
        self.acks = Acks()

    def _config(self, name: str) -> ConsumerConfig:
        """The consumer of its own, from the first message the fold at start has not seen."""
        return own_consumer(name, f"{subjects.EVENTS}.>", deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                            opt_start_seq=self.projector.seq + 1)

    def subscribe(self, name: str, config: ConsumerConfig | None = None) -> None:
        self.name = name
        events_subscriber(self.broker, f"{subjects.EVENTS}.>", name, config or self._config(name),
                          "Every event, into the read models; each coup verified as it settles.")(self.on_event)

    async def follow(self, nc: Any) -> str:
        """Claim the consumer of its own, starting after the fold at start, and follow it; its name."""
        config = await claim(nc, "projections", self._config)
        self.subscribe(config.name or "", config)
        return self.name

    async def open(self, store: EventStore) -> Projector:
        """Fold what the stream holds since the last checkpoint; the consumer starts after it."""
        self.store = store
        self.kv = await KvProjections(self.broker.connection.jetstream()).open()
        self.projector = await self.kv.restore() or Projector()
        self.written = self.projector.seq
        await fold_stream(self.projector, store, self._folded)
        self.next_save = time.monotonic() + CHECKPOINT_EVERY
        _gauges(self.projector, self.metrics)
        self.opened = True
        return self.projector

    async def close(self) -> None:
        """The last checkpoint, once the consumer has stopped."""
        assert self.kv is not None
        if self.wrote and self.written == self.projector.seq:  # not ahead of the keys
            await self._save()
        await self.kv.release()

    async def _save(self) -> None:
        assert self.kv is not None
        seq = self.projector.seq
        await self.kv.save(self.projector)
        self.saved = seq

    async def checkpointing(self) -> None:
        """A checkpoint also once the stream goes quiet, within
        ``CHECKPOINT_EVERY`` seconds of the last event (the archiver removes
        nothing from the live stream that the checkpoint does not cover)."""
        while True:
            await asyncio.sleep(CHECKPOINT_EVERY)
            if self.wrote and self.written == self.projector.seq > self.saved:
                await self._save()

    async def _write(self, changed: set[tuple[str, str]]) -> bool:
        """The keys changed, where this instance is the writer (the one that
        has just become it writes every key: it wrote none while standing by)."""
        assert self.kv is not None
        writer = await self.kv.writing(self.instance, time.time())
        if writer and not self.wrote and self.opened:
            await self._take_over()
        if writer:
            await self.kv.put(self.projector, changed if self.wrote else set(self.projector.everything()))
            self.written = self.projector.seq
        self.wrote = writer
        self.projector.forget_ended_shoes()
        return writer

    async def _take_over(self) -> None:
        """Become the writer from the last checkpoint and the live stream since,
        not from this instance's own fold: while it stood by, the archiver may
        have removed sealed shoes that the checkpoint covered and its own
        consumer had not yet delivered (the archiver waits for the checkpoint,
        not for a standby). The deliveries up to where the fold ends are then
        applied once already, and change nothing."""
        assert self.kv is not None and self.store is not None
        self.projector = await self.kv.restore() or Projector()
        self.wrote, self.opened = False, False  # the fold's pages are written as the writer's, whole at first
        try:
            await fold_stream(self.projector, self.store, self._folded)
        finally:
            self.opened = True
        log.info("projections: %s is the writer, from the checkpoint and the stream to seq %d", self.instance,
                 self.projector.seq)

    async def _folded(self, changed: set[tuple[str, str]]) -> None:  # each page written, then checkpointed
        assert self.kv is not None
        if await self._write(changed):
            await self._save()

    async def on_event(self, received: documented(envelope.Batch)) -> None:  # type: ignore[valid-type]
        """Apply one delivery; write the keys changed once nothing more is
        waiting (or every ``ACK_EVERY`` deliveries), and verify each coup it settles."""
        assert self.kv is not None and self.store is not None
        msg = received.msg.raw_message
        at = delivery(msg)
        with self.metrics.handling.labels("projections").time():
            batch = await decoded(self.broker.connection, self.name, msg, at, self.metrics)
            settled: list[tuple[str, str]] = []
            if batch is None:
                self.following.forget()
            else:
                self.following.take(Stored(at.stream_seq, msg.subject, batch), at)
                self.changed |= self.projector.apply(msg.subject, at.stream_seq, batch)
                settled = [(subjects.tokens(msg.subject)[0], e.data.coup_id) for e in batch.events
                           if isinstance(e.data, CoupSettled)]
            if self.changed and (at.pending == 0 or self.acks.unacked + 1 >= ACK_EVERY):
                changed, self.changed = self.changed, set()
                writer = await self._write(changed)
                _gauges(self.projector, self.metrics)
                if writer and time.monotonic() >= self.next_save:
                    await self._save()
                    self.next_save = time.monotonic() + CHECKPOINT_EVERY
            for table, coup in settled:  # every settled coup is verified as it closes
                await verify_settled(self.store, table, coup, self.following.pop(coup), self.metrics)
        await self.acks.handled(msg, at.pending)


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
    failures = metrics.verification_failures.labels(table)  # at zero until the first: the alert sees it rise
    if findings:
        failures.inc()
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
