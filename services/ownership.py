"""Which instance of a service owns which tables: each of the
``PARTITIONS`` partitions of the tables (casino.nats.partitions) is owned by
one live instance of each service at a time, and only that instance takes
the partition's commands and holds its tables.

Who is live is the server's to say, never a writer's: each instance renews
its membership every ``TICK``, a key of its own in the ``casino_live``
bucket (``<service>.<instance>``), whose entries the server removes
``LAPSE`` seconds after they were written (the bucket's own expiry), and a
membership the server wrote longer than ``LAPSE`` ago by its own clock is
lapsed whatever it says. The assignment, the owner of each partition, is one
key per service in the ``casino_owners`` bucket, changed only by the
revision it was read at, so two instances never both change it from the
same reading. Every ``TICK`` each instance renews, reads the live members
and the assignment, and rewrites it where it must (``rebalance``): a
partition whose owner is not live given to the least loaded, and then the
load evened out one partition at a time, so that a change moves as few
partitions as it can. An assignment that cannot be read is rewritten whole.
An instance then subscribes to the partitions it owns and lets go of those
it no longer owns.

So a new instance takes its share within a tick of starting; one that stops
hands its partitions on as it stops (``leave``); one killed loses them
``LAPSE`` seconds after its last renewal; and whatever anyone writes into
either bucket (a member that never lapses, an assignment to nobody, bytes
that are no assignment) is undone within ``LAPSE`` and a tick of its last
write. A partition moved is owned by its new instance at once and by the old
one until its next tick, so for up to a tick both may answer a command: each
decision is still guarded end to end by the store (an append on stale state
fails its expected-sequence check, and the instance catches up and decides
again), as with any number of instances. An instance that takes a partition
folds its tables afresh from the store. ``Lease`` is the same expiry for one
holder at a time (the projections' writer).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime

import msgspec
from nats.aio.client import Client
from nats.js.kv import KeyValue

from casino.metrics import Metrics
from casino.nats.partitions import PARTITIONS
from casino.nats.permissions import LIVE, OWNERS
from casino.nats.provision import LIVE_LAPSE
from casino.store.jetstream import JetStreamEventStore

log = logging.getLogger("casino")

TICK = 1.0  # seconds between an instance's renewals and readings of the assignment
LAPSE = LIVE_LAPSE  # seconds after its last renewal a membership (or a lease) runs out: the live bucket's expiry


class Assignment(msgspec.Struct):
    """The owner of each of one service's partitions ("" for none)."""

    owners: list[str] = msgspec.field(default_factory=lambda: [""] * PARTITIONS)


def read_assignment(value: bytes | None) -> Assignment:
    """The assignment a key holds; one that cannot be read (written by no
    instance of ours) is no assignment, and is written anew."""
    try:
        read = msgspec.json.decode(value or b"{}", type=Assignment)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return Assignment()
    return read if len(read.owners) == PARTITIONS else Assignment()


def rebalance(before: Assignment, live: Iterable[str]) -> Assignment:
    """The assignment with every partition owned by one of the ``live``
    instances and none owning two more than another, moving as few
    partitions as it can; nobody owns anything where none is live."""
    members = sorted(set(live))
    owners = [o if o in members else "" for o in before.owners]
    if members:
        load = {m: 0 for m in members}
        for o in owners:
            if o:
                load[o] += 1

        def least() -> str:
            return min(members, key=lambda m: load[m])

        for p, o in enumerate(owners):
            if not o:
                owners[p] = least()
                load[owners[p]] += 1
        while True:
            most = max(members, key=lambda m: load[m])
            fewest = least()
            if load[most] - load[fewest] <= 1:
                break
            p = max(p for p, o in enumerate(owners) if o == most)
            owners[p] = fewest
            load[most] -= 1
            load[fewest] += 1
    return Assignment(owners)


def lapsed(written: datetime, now: datetime) -> bool:
    """Whether an entry the server wrote at ``written`` has lapsed by ``now`` (both the server's clock)."""
    return (now - written).total_seconds() > LAPSE


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
        self.live: KeyValue | None = None
        self.members = JetStreamEventStore(nc, f"KV_{LIVE}")  # the live bucket's entries, read as stored

    async def start(self) -> None:
        """Join, own a share at once (every partition, where this is the only
        instance), and keep the share current from then on."""
        self.kv, self.live = await buckets(self.nc, OWNERS, LIVE)
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

    async def live_members(self) -> set[str]:
        """The instances of the service whose membership the server holds and
        wrote within ``LAPSE`` of the latest it wrote (this instance's own
        renewal, just made): the server's clock, never a writer's say."""
        written: dict[str, datetime] = {}

        def member(seq: int, subject: str, headers: dict[str, str], data: bytes) -> None:
            if "KV-Operation" not in headers:  # not a deletion
                written[subject.rpartition(".")[2]] = msgspec.json.decode(
                    f'"{headers.get("Nats-Time-Stamp", "")}"'.encode(), type=datetime)

        await self.members.scan_raw(f"$KV.{LIVE}.{self.service}.*", member)
        now = max(written.values(), default=None)
        return {m for m, at in written.items() if now is not None and not lapsed(at, now)}

    async def _write(self, leaving: bool) -> Assignment | None:
        """Renew (or end) this instance's membership, read the live members and
        the assignment, and write the assignment back rebalanced where it
        changed; None where another instance wrote it in between (asked again)."""
        from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

        assert self.kv is not None and self.live is not None
        mine = f"{self.service}.{self.instance}"
        if leaving:
            await self.live.delete(mine)
        else:
            await self.live.put(mine, b"")
        live = await self.live_members() - {self.instance}
        if not leaving:
            live.add(self.instance)
        revision = 0
        try:
            entry = await self.kv.get(self.service)
            before = read_assignment(entry.value)
            revision = entry.revision or 0
        except KeyNotFoundError:
            before = Assignment()
        after = rebalance(before, live)
        if after == before and revision:
            return after
        try:
            if revision:
                await self.kv.update(self.service, msgspec.json.encode(after), last=revision)
            else:
                await self.kv.create(self.service, msgspec.json.encode(after))
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
                    handed = any(after.owners)
                    break
            await asyncio.sleep(0.05)
        return handed


class Lease:
    """``key`` of the live bucket held by one ``holder`` at a time: taken
    where nobody holds it, renewed by the revision it was written at, for as
    long as the server keeps it (``LAPSE`` after its last renewal: the
    bucket's own expiry, never a time the holder claims). Renewed at most
    every ``TICK``."""

    def __init__(self, live: KeyValue, key: str, holder: str) -> None:
        self.live, self.key, self.holder = live, key, holder
        self.revision = 0  # of the lease as this holder last wrote it; 0 for not held
        self.renewed = 0.0
        self.renewing = asyncio.Lock()  # one renewal at a time: two from one reading, one would lose to the other

    async def hold(self) -> bool:
        """Whether ``holder`` holds the lease now (taken or renewed here)."""
        async with self.renewing:
            return await self._hold()

    async def _hold(self) -> bool:
        from nats.js.errors import KeyWrongLastSequenceError

        if self.revision and time.monotonic() - self.renewed < TICK:
            return True
        try:
            if self.revision:
                self.revision = await self.live.update(self.key, self.holder.encode(), last=self.revision)
            else:
                self.revision = await self.live.create(self.key, self.holder.encode())
        except KeyWrongLastSequenceError:  # another holds it, or took it meanwhile
            self.revision = 0
            return False
        self.renewed = time.monotonic()
        return True

    async def release(self) -> None:
        """Give the lease up (on stopping): the next holder takes it at once, not after it has run out."""
        from nats.js.errors import APIError, KeyWrongLastSequenceError

        async with self.renewing:
            if self.revision:
                with contextlib.suppress(KeyWrongLastSequenceError, APIError):  # taken already (a wrong last sequence)
                    await self.live.delete(self.key, last=self.revision)
                self.revision = 0


async def buckets(nc: Client, *names: str) -> list[KeyValue]:
    """The buckets ``names``, which the administrator created; a clear error for one missing."""
    from nats.js.errors import BucketNotFoundError

    found = []
    for name in names:
        try:
            found.append(await nc.jetstream().key_value(name))
        except BucketNotFoundError:
            raise RuntimeError(f"the bucket {name} is missing: the administrator creates the buckets "
                               "(`casino run` does, or casino.nats.provision)") from None
    return found
