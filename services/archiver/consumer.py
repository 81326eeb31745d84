"""The archiver's consumer: each shoe's shuffle and end (a shoe's messages
between its coups), one instance at a time (``services.followers.Sole``), a
table asked again until the shoe before the one shuffled is sealed and
removed, and a sweep of every table at its start and every ``SWEEP_EVERY``
seconds.

A shoe may be sealed once the next has a settled coup: the next shoe's
shuffle says one is coming, and the table is asked again ``AGAIN_FIRST``
seconds after, then twice as long each time until it is, and removed (the
read models' checkpoint may not be past it yet), or until the wait is the
sweep's (a table that stopped dealing is left to it). A delivery a
settlement, as before, was most of the archiver's 1.75 ms of CPU a coup at
16 tables flat out (docs/benchmarks.md); a shuffle and an end are two a shoe."""

import asyncio
import logging
import time
from collections.abc import Callable

from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy

from casino.metrics import Metrics
from casino.store import envelope, subjects
from services.archiver.service import ARCHIVER_DURABLE, ArchiverService
from services.followers import IN_FLIGHT, Sole, events_subscriber, shared_consumer
from services.messaging import ack, documented

log = logging.getLogger("casino")
# Seconds between the archiver's sweeps of every table, which take up what no shuffle asked for (a shoe
# ended while no archiver ran): each costs a few direct gets a table, 700 a second at 5,000 tables every 30 s.
SWEEP_EVERY = 300.0
AGAIN_FIRST = 0.5  # seconds before a table whose shoe may not be sealed yet is first asked again
# What the archiver's consumer delivers: every shoe's messages between coups (its shuffle, its end).
ARCHIVER_FILTER = subjects.event("*", "*", subjects.NO_COUP, "shoe")
ARCHIVER_DELIVERY = "_INBOX.archiver.events"  # where the archiver's consumer delivers


async def ensure_archiver_consumer(nc: Client) -> None:
    """Make the consumer the archiver's instances share, if it does not
    exist, or change one of an earlier release to follow what this one
    follows (``services.followers.shared_consumer``): each shoe's messages
    between coups, from the first made on (the archiver's sweep seals what
    came before it)."""
    await shared_consumer(nc, ARCHIVER_DURABLE, [ARCHIVER_FILTER], ConsumerConfig(
        durable_name=ARCHIVER_DURABLE, deliver_subject=ARCHIVER_DELIVERY, deliver_group=ARCHIVER_DURABLE,
        deliver_policy=DeliverPolicy.NEW, ack_wait=60.0, max_ack_pending=IN_FLIGHT))


class ArchiverConsumer(Sole):
    """The archiver follows each shoe's shuffle and end (a shoe shuffled after
    the table's last sealed one but one may let the shoe before it be sealed
    once it has a settled coup: the table is asked again until it is), and
    sweeps every table at its start and every ``SWEEP_EVERY`` seconds, one
    instance at a time (``Sole``)."""

    deliver, queue = ARCHIVER_DELIVERY, ARCHIVER_DURABLE

    def __init__(self, service: Callable[[], ArchiverService], metrics: Metrics) -> None:
        super().__init__()
        self.service, self.metrics = service, metrics
        self.sweeping: asyncio.Task[None] | None = None
        self.again: asyncio.Task[None] | None = None
        # Each table whose latest shoe shuffled may let the shoe before it be sealed: that shoe, when it is
        # asked again, and the wait before the time after.
        self.waiting: dict[str, tuple[str, float, float]] = {}

    async def take(self, nc: Client, parts: set[int]) -> None:
        await super().take(nc, parts)
        if self.subscription is not None and self.sweeping is None:
            self.sweeping = asyncio.create_task(self._sweeping())
            self.again = asyncio.create_task(self._asking_again())

    async def stop(self) -> None:
        for task in (self.sweeping, self.again):
            if task is not None:
                task.cancel()
        self.sweeping = self.again = None
        self.waiting.clear()
        await super().stop()

    async def _sweeping(self) -> None:
        while self.subscription is not None:  # besides its cancellation, which Python 3.11 may lose
            try:
                await self.service().sweep()
            except Exception as exc:  # the server away, or a reply late: the next sweep tries again
                log.error("archiver: sweep: %s: %s", type(exc).__name__, exc)
            await asyncio.sleep(SWEEP_EVERY)

    async def _asking_again(self) -> None:
        while self.subscription is not None:
            await asyncio.sleep(AGAIN_FIRST)
            now = time.monotonic()
            for table, (shoe, when, wait) in list(self.waiting.items()):
                if when <= now:
                    await self._advance(table, shoe, 2 * wait)

    async def _advance(self, table: str, shoe: str, wait: float) -> None:
        """The table advanced if ``shoe`` may let the shoe before it be sealed;
        asked again after ``wait`` seconds until it is."""
        archiving = self.service()
        if not archiving.behind(table, shoe):
            self.waiting.pop(table, None)
            return
        try:
            await archiving.advance(table)
        except Exception as exc:  # not the delivery's fault: asked again, and the sweep takes the table too
            log.error("archiver: table %s: %s: %s", table, type(exc).__name__, exc)
        if archiving.behind(table, shoe) and wait < SWEEP_EVERY:
            self.waiting[table] = (shoe, time.monotonic() + wait, wait)
        else:  # sealed, or left to the sweep
            self.waiting.pop(table, None)

    async def on_turn(self, msgs: list[Msg]) -> None:
        """Each table of the turn advanced once, for the latest of its shoes the turn names."""
        latest: dict[str, str] = {}
        for msg in msgs:
            table, shoe, _, _ = subjects.tokens(msg.subject)
            if (subjects.shoe_number(table, shoe) or 0) >= (subjects.shoe_number(table, latest.get(table, "")) or 0):
                latest[table] = shoe
        with self.metrics.handling.labels(ARCHIVER_DURABLE).time():
            for table, shoe in latest.items():
                held = self.waiting.get(table)
                if held is None or (subjects.shoe_number(table, shoe) or 0) >= (
                        subjects.shoe_number(table, held[0]) or 0):
                    await self._advance(table, shoe, AGAIN_FIRST)
        for msg in msgs:
            await ack(msg)


def documented_archiver(broker: NatsBroker) -> None:
    """Declare the archiver's consumer for the AsyncAPI document (its deliveries come through ``ArchiverConsumer``)."""
    @events_subscriber(broker, ARCHIVER_FILTER, ARCHIVER_DURABLE, ConsumerConfig(durable_name=ARCHIVER_DURABLE),
                       "Each shoe's messages between coups (its shuffle, its end): once the shoe shuffled has a "
                       "settled coup, the shoes before it may be sealed and removed.")
    async def on_event(received: documented(envelope.Batch)) -> None:  # type: ignore[valid-type]
        raise AssertionError("declared for the document only")
