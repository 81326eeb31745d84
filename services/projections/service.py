"""The projections service: the read models, kept current from the stream,
and every coup verified as it settles."""

from __future__ import annotations

import asyncio
import secrets
import time

from faststream.nats import JStream, NatsBroker, PullSub
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy

from casino.audit.archive import fold_history
from casino.audit.verify import verify_coup
from casino.metrics import Metrics
from casino.nats.permissions import LIVE
from casino.protocol.service import log
from casino.readmodels.projections import KvProjections, Projector, fold_stream
from casino.rules.settlement import CoupSettled
from casino.rules.shoe import RoundStarted
from casino.store import envelope, subjects
from casino.store.envelope import CoupConfigured
from casino.store.eventstore import EventStore, Stored
from casino.store.following import Following
from casino.store.jetstream import STREAM
from services.followers import TURN_MOST, Turns, claim, own_consumer
from services.messaging import decoded, delivery, documented
from services.ownership import Lease, buckets

WRITER = "projections.writer"  # the key of the read models' writer's lease, in the live bucket

CHECKPOINT_EVERY = 1.0  # seconds between the projections' checkpoints, at most


class Projections:
    """The read models, kept current by one instance at a time: the holder of
    the writer's lease (``services.ownership.Lease``: it lasts as long as the
    server keeps it, a lapse after its last renewal). It takes them up from the
    last checkpoint and the stream since (from the first event if there is
    no checkpoint), then follows a durable consumer of its own that starts
    where that fold ended, a turn at a time (``services.followers.Turns``:
    a coup's events, a few milliseconds apart, come in one turn, and each key
    of its table is written once for them rather than at each; the web reads
    the read models 0.25 s after a table's events, services.web.floor.REFRESH),
    writing the keys a turn changed, and a checkpoint at most
    every ``CHECKPOINT_EVERY`` seconds and on stopping: a restart reads only
    what came since. The other instances stand by, folding nothing: every
    ``CHECKPOINT_EVERY`` seconds each asks for the lease, and the one that
    gets it (its holder stopped, or gone a lapse) takes over the same
    way. A writer that finds the lease gone to another lets its consumer go
    and stands by."""

    def __init__(self, broker: NatsBroker, metrics: Metrics, durables: list[str]) -> None:
        self.broker, self.metrics = broker, metrics
        self.durables = durables  # the service's consumers, whose lag says when it is ready
        self.name = ""  # the consumer of its own, while it writes
        self.subscription: Turns | None = None  # its turns
        self.closed = False
        self.instance = f"projections-{secrets.token_hex(8)}"  # who holds the writer's lease
        self.lease: Lease | None = None
        self.projector = Projector()
        self.kv: KvProjections | None = None
        self.store: EventStore | None = None
        self.written = 0  # the stream sequence up to which every key changed is written
        self.wrote = False  # whether this instance was the writer at its last write
        self.changed: set[tuple[str, str]] = set()
        self.writing = asyncio.Lock()
        self.next_save = 0.0
        self.saved = 0  # the stream sequence the last checkpoint saved covers
        # Each coup's messages from its round's start, verified from memory when it settles.
        # A coup's first message: its round started, or its opening where the shoe started its round
        # as the last one ended, in a message of the coup before (docs/clauses.md, "The next round").
        self.following = Following(first=(RoundStarted, CoupConfigured))

    def _config(self, name: str) -> ConsumerConfig:
        """The consumer of its own, from the first message the fold has not seen."""
        return own_consumer(name, f"{subjects.EVENTS}.>", deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                            opt_start_seq=self.projector.seq + 1)

    async def open(self, store: EventStore) -> Projector:
        """Bind the buckets; the read models, where this instance gets the lease."""
        self.store = store
        self.kv = await KvProjections(self.broker.connection.jetstream()).open()
        (live,) = await buckets(self.broker.connection, LIVE)
        self.lease = Lease(live, WRITER, self.instance)
        await self.lead_if_free()
        return self.projector

    async def lead_if_free(self) -> bool:
        """Become the writer if the lease is free: the read models from the
        checkpoint and the stream since, then the consumer from where that
        fold ended; whether this instance writes."""
        assert self.lease is not None
        if not await self.lease.hold():
            return False
        await self._take_over()
        if not self.wrote:  # the lease went to another during the fold
            return False
        config = await claim(self.broker.connection, "projections", self._config)
        self.name = config.name or ""
        self.subscription = Turns(self.broker.connection, self.name, self.on_turn, self._lost, self.metrics)
        await self.subscription.start()
        self.durables.append(self.name)
        self.next_save = time.monotonic() + CHECKPOINT_EVERY
        return True

    async def stand_by(self) -> None:
        """Let the consumer go (it lapses); the figures of the read models are
        the writer's to give, and are no longer given here."""
        await self._unsubscribe()
        self.wrote = False
        self.projector, self.changed = Projector(), set()
        self.following.forget()
        for gauge in (self.metrics.house_net, self.metrics.coup_open, self.metrics.last_event,
                      self.metrics.penetration):
            gauge.clear()
        log.info("projections: %s stands by", self.instance)

    async def _unsubscribe(self) -> None:
        """No more turns (the one being handled ends first)."""
        subscription, self.subscription = self.subscription, None
        if subscription is not None:
            await subscription.stop()
        if self.name in self.durables:
            self.durables.remove(self.name)

    def _lost(self, exc: BaseException) -> None:
        """The turns ended (the consumer gone, or a turn failed): the writer
        takes the read models up again from the checkpoint at its next keeping."""
        self.subscription = None
        if self.name in self.durables:
            self.durables.remove(self.name)

    async def close(self) -> None:
        """The last checkpoint, once the consumer has stopped; the lease given up."""
        assert self.kv is not None
        self.closed = True
        await self._unsubscribe()
        if self.wrote and self.changed:
            async with self.writing:
                await self._flush()
        if self.wrote and self.written == self.projector.seq:  # not ahead of the keys
            await self._save()
        if self.lease is not None:
            await self.lease.release()

    async def _save(self) -> None:
        assert self.kv is not None
        seq = self.projector.seq
        await self.kv.save(self.projector)
        self.saved = seq

    async def keeping(self) -> None:
        """Every ``CHECKPOINT_EVERY`` seconds: the writer renews its lease and
        saves a checkpoint once the stream has gone quiet (the archiver removes
        nothing from the live stream that the checkpoint does not cover), or
        stands by if the lease has gone to another; a standby asks for the lease."""
        assert self.kv is not None and self.lease is not None
        while not self.closed:  # besides its cancellation, which Python 3.11 may lose in a request answered
            await asyncio.sleep(CHECKPOINT_EVERY)
            if self.closed:
                break
            try:
                if self.subscription is None:
                    await self.lead_if_free()
                elif not self.wrote or not await self.lease.hold():
                    await self.stand_by()
                elif self.written == self.projector.seq > self.saved:
                    await self._save()
            except Exception as exc:  # the server away: asked again at the next turn
                log.error("projections: %s: %s", type(exc).__name__, exc)

    async def _write(self, changed: set[tuple[str, str]]) -> bool:
        """The keys changed, where this instance is the writer (every key, at
        the first write after taking over)."""
        assert self.kv is not None and self.lease is not None
        writer = await self.lease.hold()
        every = not self.wrote
        if writer:
            await self.kv.put(self.projector, set(self.projector.everything()) if every else changed)
            self.written = self.projector.seq
        self.wrote = writer
        self.projector.forget_ended_shoes(None if every else (key for bucket, key in changed if bucket == "shoe_stats"))
        return writer

    async def _take_over(self) -> None:
        """The read models from the last checkpoint and the live stream since
        (the archiver removes nothing the checkpoint does not cover), each page
        of the fold written and checkpointed. With no checkpoint to take (none
        yet, or one of another version of the fold), from the whole history:
        the archive's sealed shoes, then the live stream (``fold_history``)."""
        assert self.kv is not None and self.store is not None
        self.projector = await self.kv.restore() or Projector()
        self.written, self.wrote, self.changed = self.projector.seq, False, set()
        self.following.forget()
        if self.projector.seq:
            await fold_stream(self.projector, self.store, self._folded)
        else:
            await fold_history(self.projector, self.broker.connection, self._folded_from)
        if not self.wrote:  # nothing to fold since the checkpoint: every key written once as the writer's
            await self._write(set())
        _gauges(self.projector, self.metrics, set(self.projector.table_status))  # every table's, once
        log.info("projections: %s is the writer, from the checkpoint and the stream to seq %d", self.instance,
                 self.projector.seq)

    async def _folded(self, changed: set[tuple[str, str]]) -> None:  # each page written, then checkpointed
        if await self._write(changed):
            await self._save()

    async def _folded_from(self, projector: Projector, changed: set[tuple[str, str]]) -> None:
        """A page of the whole history folded: the live stream's as any page;
        a table's sealed shoes, folded apart, their ended shoes' final figures
        written (where this instance is the writer) and let go."""
        if projector is self.projector:
            return await self._folded(changed)
        assert self.kv is not None and self.lease is not None
        if await self.lease.hold():
            await self.kv.put(projector, {("shoe_stats", k) for k, st in projector.shoe_stats.items() if st.ended},
                              with_seq=False)
        projector.forget_ended_shoes()

    async def _flush(self) -> None:
        """The keys changed written (where this instance is the writer), and
        a checkpoint once ``CHECKPOINT_EVERY`` seconds have gone since the
        last; ``writing`` held (no turn is applied meanwhile: a shoe is let
        go only once its end is written)."""
        if not self.changed:
            return
        changed, self.changed = self.changed, set()
        writer = await self._write(changed)
        _gauges(self.projector, self.metrics, _tables_of(changed))
        if writer and time.monotonic() >= self.next_save:
            await self._save()
            self.next_save = time.monotonic() + CHECKPOINT_EVERY

    async def on_turn(self, msgs: list[Msg]) -> None:
        """Apply a turn's messages, in stream order; write the keys they
        changed; and verify each coup they settle."""
        assert self.kv is not None and self.store is not None
        async with self.writing:
            with self.metrics.handling.labels("projections").time():
                settled: list[tuple[str, str, list[Stored] | None]] = []
                for msg in msgs:
                    at = delivery(msg)
                    batch = await decoded(self.broker.connection, self.name, msg, at, self.metrics)
                    if batch is None:
                        self.following.forget()
                        continue
                    self.following.take(Stored(at.stream_seq, msg.subject, batch), at)
                    self.changed |= self.projector.apply(msg.subject, at.stream_seq, batch)
                    # Its messages taken as it settles: later coups of the same turn may be followed meanwhile.
                    settled += [(subjects.tokens(msg.subject)[0], e.data.coup_id, self.following.pop(e.data.coup_id))
                                for e in batch.events if isinstance(e.data, CoupSettled)]
                await self._flush()
                for table, coup, kept in settled:  # every settled coup is verified as it closes
                    await verify_settled(self.store, table, coup, kept, self.metrics)


def documented_projections(broker: NatsBroker, name: str) -> None:
    """Declare the writer's pull consumer for the AsyncAPI document (its messages come through ``Projections``)."""
    @broker.subscriber(f"{subjects.EVENTS}.>", stream=JStream(STREAM, declare=False), durable=name,
                       config=ConsumerConfig(durable_name=name), pull_sub=PullSub(batch_size=TURN_MOST, batch=True),
                       title=f"{subjects.EVENTS}.>", description="Every event, pulled in turns (every message waiting "
                       "taken together) into the read models; each coup verified as it settles.")
    async def on_event(received: documented(envelope.Batch)) -> None:  # type: ignore[valid-type]
        raise AssertionError("declared for the document only")


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


def _tables_of(changed: set[tuple[str, str]]) -> set[str]:
    """The tables whose read models' keys ``changed`` (a shoe's stats key is its shoe's id)."""
    return {subjects.table_of_shoe(key) if bucket == "shoe_stats" else key for bucket, key in changed}


def _gauges(projector: Projector, metrics: Metrics, tables: set[str]) -> None:
    """The floor's figures that only the whole history gives, of ``tables``
    (those whose read models changed; a table's at a time, never the
    floor's: set for every table at each write, they cost the projections
    0.8 of a core at 1,500 tables dealing a coup a minute): house net, penetration."""
    for table in tables:
        if (takings := projector.takings.get(table)) is not None:
            metrics.house_net.labels(table).set(takings.house_net)
        if (status := projector.table_status.get(table)) is None:
            continue
        metrics.coup_open.labels(table).set(1 if status.phase in ("betting", "dealing", "finished") else 0)
        metrics.last_event.labels(table).set(status.last_event_at)
        shoe = projector.shoe_stats.get(status.shoe)
        if shoe is not None:
            metrics.penetration.labels(table).set(shoe.penetration)
