"""Which instance of a service owns which tables: each of the
``PARTITIONS`` partitions of the tables (casino.nats.partitions) is owned by
one live instance of each service at a time, and only that instance takes
the partition's commands and holds its tables.

The assignment is one key per service in the ``casino_owners`` bucket
(``Assignment``: the live instances, each with the wall-clock time its
membership runs out, and the owner of each partition), changed only by the
revision it was read at, so two instances never both change it from the
same reading. Every ``TICK`` each instance reads it, and rewrites it where
it must (``rebalance``): its own membership renewed (every third of
``LAPSE``), instances whose membership ran out removed and their partitions
given to the least loaded, and then the load evened out one partition at a
time, so that a change moves as few partitions as it can. An instance then
subscribes to the partitions it owns and lets go of those it no longer owns.

So a new instance takes its share within a tick of starting; one that stops
hands its partitions on as it stops (``leave``); one killed loses them
``LAPSE`` seconds after its last renewal. A partition moved is owned by its
new instance at once and by the old one until its next tick, so for up to a
tick both may answer a command: each decision is still guarded end to end by
the store (an append on stale state fails its expected-sequence check, and
the instance catches up and decides again), as with any number of instances.
An instance that takes a partition folds its tables afresh from the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable

import msgspec
from nats.aio.client import Client
from nats.js.kv import KeyValue

from casino.metrics import Metrics
from casino.nats.partitions import PARTITIONS
from casino.nats.permissions import OWNERS

log = logging.getLogger("casino")

TICK = 1.0  # seconds between an instance's readings of the assignment
LAPSE = 6.0  # seconds after its last renewal an instance's membership runs out


class Assignment(msgspec.Struct):
    """One service's instances and the owner of each partition ("" for none)."""

    members: dict[str, float] = msgspec.field(default_factory=dict)
    owners: list[str] = msgspec.field(default_factory=lambda: [""] * PARTITIONS)


def rebalance(before: Assignment, me: str, now: float, *, leaving: bool = False) -> Assignment:
    """The assignment as ``me`` leaves it at ``now``: its membership renewed
    (or, ``leaving``, removed), the lapsed members removed, every partition
    owned by a live member, and no member owning two more than another."""
    members = {m: until for m, until in before.members.items() if until > now and m != me}
    if not leaving:
        members[me] = before.members[me] if before.members.get(me, 0.0) - now > LAPSE * 2 / 3 else now + LAPSE
    owners = [o if o in members else "" for o in (before.owners + [""] * PARTITIONS)[:PARTITIONS]]
    if members:
        load = {m: 0 for m in members}
        for o in owners:
            if o:
                load[o] += 1

        def least() -> str:
            return min(sorted(load), key=lambda m: load[m])

        for p, o in enumerate(owners):
            if not o:
                owners[p] = least()
                load[owners[p]] += 1
        while True:
            most = max(sorted(load), key=lambda m: load[m])
            fewest = least()
            if load[most] - load[fewest] <= 1:
                break
            p = max(p for p, o in enumerate(owners) if o == most)
            owners[p] = fewest
            load[most] -= 1
            load[fewest] += 1
    return Assignment(members, owners)


Changed = Callable[[set[int]], Awaitable[None]]


class Ownership:
    """One instance's share of its service's partitions, kept current every
    ``TICK``: ``take`` is called with the partitions it comes to own,
    ``release`` with those it no longer does."""

    def __init__(self, nc: Client, service: str, take: Changed, release: Changed, metrics: Metrics | None = None,
                 *, instance: str = "") -> None:
        self.nc, self.service, self.take, self.release, self.metrics = nc, service, take, release, metrics
        self.instance = instance or f"{service}-{secrets.token_hex(6)}"
        self.owned: set[int] = set()
        self.task: asyncio.Task[None] | None = None
        self.stopping = False
        self.kv: KeyValue | None = None

    async def start(self) -> None:
        """Join, own a share at once (every partition, where this is the only
        instance), and keep the share current from then on."""
        from nats.js.errors import BucketNotFoundError

        try:
            self.kv = await self.nc.jetstream().key_value(OWNERS)
        except BucketNotFoundError:
            raise RuntimeError(f"the owners' bucket {OWNERS} is missing: the administrator creates the buckets "
                               "(`casino run` does, or casino.nats.provision)") from None
        while not await self.tick():
            await asyncio.sleep(0.05)
        self.task = asyncio.create_task(self._ticking())

    async def _ticking(self) -> None:
        while not self.stopping:
            await asyncio.sleep(TICK)
            if self.stopping:
                break
            try:
                await self.tick()
            except Exception as exc:  # the server away: the next tick tries again; the lease runs on meanwhile
                log.error("%s: the owners' assignment could not be read or written: %s: %s", self.instance,
                          type(exc).__name__, exc)

    async def _write(self, leaving: bool) -> Assignment | None:
        """Read the assignment and write it back rebalanced where it changed;
        None where another instance wrote it in between (asked again)."""
        from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

        kv = self.kv
        assert kv is not None
        revision = 0
        try:
            entry = await kv.get(self.service)
            before = msgspec.json.decode(entry.value or b"{}", type=Assignment)
            revision = entry.revision or 0
        except KeyNotFoundError:
            before = Assignment()
        after = rebalance(before, self.instance, time.time(), leaving=leaving)
        if after == before:
            return after
        try:
            if revision:
                await kv.update(self.service, msgspec.json.encode(after), last=revision)
            else:
                await kv.create(self.service, msgspec.json.encode(after))
        except KeyWrongLastSequenceError:
            return None
        return after

    async def tick(self) -> bool:
        """One reading; whether it went through (not raced by another instance's write)."""
        after = await self._write(leaving=False)
        if after is None:
            return False
        mine = {p for p, o in enumerate(after.owners) if o == self.instance}
        lost, gained = self.owned - mine, mine - self.owned
        if lost:
            await self.release(lost)
            self.owned -= lost
        if gained:  # owned once taken: a take that fails is made again at the next tick
            await self.take(gained)
            self.owned |= gained
        if lost or gained:
            if self.metrics is not None:
                self.metrics.partitions.labels(self.metrics.service).set(len(mine))
            log.info("%s owns %d of %d partitions (took %s, let go of %s)", self.instance, len(mine), PARTITIONS,
                     sorted(gained), sorted(lost))
        return True

    async def stop(self) -> None:
        """Read and renew nothing more, leaving the assignment as it stands.
        The loop also reads a flag at every turn: Python 3.11 loses a
        cancellation that comes as a request is answered (``asyncio.wait_for``),
        and the renewals would go on."""
        self.stopping = True
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

    async def leave(self) -> bool:
        """Hand every partition on to the other instances; whether any other is
        live to take them (then this one goes on answering for a tick, until they have)."""
        await self.stop()
        handed = False
        for _ in range(20):
            with contextlib.suppress(Exception):
                after = await self._write(leaving=True)
                if after is not None:
                    handed = bool(after.members)
                    break
            await asyncio.sleep(0.05)
        return handed
