"""The event store on NATS JetStream (nats-py, where faststream has no API)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable

import msgspec
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import (
    RawStreamMsg,
    StorageType,
    StoreCompression,
    StreamConfig,
)
from nats.js.errors import APIError, BadRequestError, NotFoundError

from casino.store.envelope import Batch, encode
from casino.store.eventstore import Appended, Conflict, Stored, read_stored
from casino.store.subjects import ARCHIVE, EVENTS, NO_COUP, SECRETS, tokens

STREAM = "CASINO"
SECRETS_STREAM = "CASINO_SHOE_SECRETS"
ARCHIVE_STREAM = "CASINO_ARCHIVE"
DLQ_STREAM = "CASINO_DLQ"
DLQ_SUBJECTS = "casino.dlq"
MAX_DELIVERIES = 5
READ_STALL = 30.0  # seconds a read may go without a message before it gives up
READ_PAGE = 2048  # messages a direct get hands back at a time
NO_RESPONDERS = 503
WRONG_LAST_SEQUENCE = 10071
# Every stream is compressed on disk: a coup's events, JSON with their envelopes,
# compress well (``make bench`` reports the bytes a coup takes before and after).
# The server compresses a block of messages once it is full, off the append path.
COMPRESSION = StoreCompression.S2


def stream_config(replicas: int = 1, duplicate_window_s: float = 120.0, casino: str = "") -> StreamConfig:
    """The one event stream: file storage, compressed, no message deleted, a
    duplicate window. A purge is allowed by the stream for the archiver alone
    to remove a shoe once its seal is stored and verified (no other user may
    ask for one: casino.nats.permissions); a stream made by an earlier release
    denies it, and nobody changes that in place (its shoes are sealed, not removed).
    Its description is the casino's name (``casino``), recorded once as the
    stream is made, with the time the server made it (``casino_named``)."""
    return StreamConfig(
        name=STREAM, subjects=[f"{EVENTS}.>"], storage=StorageType.FILE, num_replicas=replicas,
        deny_delete=True, deny_purge=False, allow_direct=True, duplicate_window=duplicate_window_s,
        compression=COMPRESSION, description=casino or None,
    )


def archive_config(replicas: int = 1) -> StreamConfig:
    """The sealed shoes (casino.audit.archive): one message a shoe, already
    compressed, under a subject a shoe; nothing deleted or purged, ever."""
    return StreamConfig(
        name=ARCHIVE_STREAM, subjects=[f"{ARCHIVE}.>"], storage=StorageType.FILE, num_replicas=replicas,
        deny_delete=True, deny_purge=True, allow_direct=True, duplicate_window=120.0, max_msg_size=-1,
    )


def secrets_config(replicas: int = 1) -> StreamConfig:
    """The shoe service's shuffled orders, kept out of the public stream."""
    return StreamConfig(
        name=SECRETS_STREAM, subjects=[f"{SECRETS}.>"], storage=StorageType.FILE, num_replicas=replicas,
        deny_delete=True, deny_purge=True, allow_direct=True, compression=COMPRESSION,
    )


def dlq_config(replicas: int = 1) -> StreamConfig:
    """Dead letters: events a consumer could not handle, with the reason."""
    return StreamConfig(name=DLQ_STREAM, subjects=[f"{DLQ_SUBJECTS}.>"], storage=StorageType.FILE,
                        num_replicas=replicas, deny_delete=True, deny_purge=True, compression=COMPRESSION)


async def dead_letter(js: JetStreamContext, consumer: str, subject: str, seq: int, data: bytes, reason: str) -> None:
    """File an event that ``consumer`` cannot handle, so it can go on with the next."""
    await js.publish(f"{DLQ_SUBJECTS}.{consumer}", data, stream=DLQ_STREAM, headers={
        "Casino-Original-Subject": subject, "Casino-Original-Sequence": str(seq),
        "Casino-Reason": reason[:1000], "Nats-Msg-Id": f"dlq:{consumer}:{seq}"})


def declared_streams(replicas: int = 1, casino: str = "") -> list[StreamConfig]:
    return [stream_config(replicas, casino=casino), secrets_config(replicas), dlq_config(replicas),
            archive_config(replicas)]


# What a stream's declaration fixes and a running store must hold as declared:
# what it takes in (subjects, sources, a mirror), where it sends copies
# (republish), and what it keeps and lets go (limits, deletes and purges; a
# stream that denies more than declared keeps more, and is as good).
# Compression is not among them: a stream of an earlier release made without
# it keeps and shows the same messages.
DECLARED = ("subjects", "sources", "mirror", "republish", "retention", "max_msgs", "max_bytes", "max_age",
            "max_msgs_per_subject", "max_msg_size", "discard", "deny_delete", "deny_purge", "allow_rollup_hdrs",
            "storage")
STRICTER = ("deny_delete", "deny_purge")


SERVER_DEFAULTS = {"retention": "limits", "discard": "old", "storage": "file"}  # what the server takes for unsaid


def _setting(field: str, value: object) -> object:
    """A setting as compared: the server's and the client's ways of saying
    "none" (None, -1, 0, empty, false) the same; enums by value; sources and
    a mirror by the stream they take from."""
    if value is None and field in SERVER_DEFAULTS:
        return SERVER_DEFAULTS[field]
    if value in (None, -1, 0, 0.0, [], False, "none", StoreCompression.NONE):
        return None
    if isinstance(value, list):
        return sorted(str(getattr(v, "name", v)) for v in value)
    return getattr(value, "name", None) if hasattr(value, "external") else getattr(value, "value", value)


def differences(actual: StreamConfig, declared: StreamConfig) -> list[str]:
    """The declared settings a stream does not hold, each as ``name: held (declared)``."""
    held = {f: (_setting(f, getattr(actual, f)), _setting(f, getattr(declared, f))) for f in DECLARED}
    return [f"{f}: {a!r} (declared {d!r})" for f, (a, d) in held.items() if a != d and not (f in STRICTER and a)]


class Undeclared(RuntimeError):
    """A stream differs from its declaration: changing one is a migration (docs/security.md)."""


async def ensure_streams(js: JetStreamContext, replicas: int = 1, casino: str = "") -> None:
    """Create the streams that do not exist, as declared (idempotent; the
    administrator's: casino.nats.provision). A stream that exists is never
    changed in place, by anyone: one that differs from its declaration is
    refused, by name and setting; an event stream made for another casino
    than ``casino`` too (one made before names were recorded stays unnamed)."""
    for config in declared_streams(replicas, casino):
        try:
            info = await js.stream_info(config.name or "")
        except NotFoundError:
            await js.add_stream(config)
            continue
        require_declared(info.config, config)
        if casino and info.config.description and info.config.description != casino:
            raise Undeclared(f"the stream {config.name} is the record of casino {info.config.description!r}, "
                             f"not of {casino!r}: a casino's record is never another's")


class Named(msgspec.Struct, frozen=True):
    """Whose record a store is: the casino's name and when its record was
    made, as provisioning recorded them (empty for a store made before)."""

    casino: str = ""
    since: str = ""

    def header(self) -> str:
        """The line a replay or an export begins with."""
        return (f"Casino {self.casino!r}, record made {self.since}" if self.casino else
                "Casino not named (its record was made before provisioning recorded a name)")


async def casino_named(js: JetStreamContext) -> Named:
    """The casino's name and the time its event stream was made, read from the stream's own information."""
    info = await js.stream_info(STREAM)
    since = f"{str(info.created)[:19].replace('T', ' ')} UTC" if info.created else ""  # as the server sent it
    return Named(info.config.description or "", since)


def require_declared(actual: StreamConfig, declared: StreamConfig) -> None:
    if found := differences(actual, declared):
        raise Undeclared(f"the stream {declared.name} differs from its declaration ({'; '.join(found)}): a change "
                         "of a stream's configuration is a reviewed, recorded migration (docs/security.md), never "
                         "made in place")


class JetStreamEventStore:
    """Appends with ``Nats-Expected-Last-Subject-Sequence`` (and its ``-Subject``
    filter for aggregates spread over several subjects) and ``Nats-Msg-Id``."""

    def __init__(self, nc: Client, stream: str = STREAM) -> None:
        self.nc = nc
        self.js = nc.jetstream()
        self.stream = stream

    async def append(self, subject: str, batch: Batch, *, expected: int, msg_id: str,
                     guard: str | None = None) -> Appended:
        headers = {"Nats-Expected-Last-Subject-Sequence": str(expected), "Nats-Msg-Id": msg_id}
        if guard is not None and guard != subject:
            headers["Nats-Expected-Last-Subject-Sequence-Subject"] = guard
        try:
            ack = await self.js.publish(subject, encode(batch), stream=self.stream, headers=headers)
        except (BadRequestError, APIError) as exc:
            if getattr(exc, "err_code", None) != WRONG_LAST_SEQUENCE:
                raise
            # The server checks the expected sequence before the duplicate window:
            # a retry of an append that was written shows up here. Find it, by
            # its id alone (what else was written there may be no batch of ours).
            written: list[int] = []
            await self.scan_raw(guard or subject, lambda seq, _, headers, __: written.append(seq) if headers.get(
                "Nats-Msg-Id") == msg_id else None, after=expected)
            if written:
                return Appended(written[0], duplicate=True)
            raise Conflict(str(exc.description)) from None
        return Appended(ack.seq, bool(ack.duplicate))

    async def read(self, filter_: str, after: int = 0, limit: int | None = None) -> list[Stored]:
        """Every message on ``filter_`` with a sequence above ``after``, in
        order, or the first ``limit`` of them."""
        out: list[Stored] = []
        await self.scan(filter_, out.append, after, limit)
        # The subscription is gone but for a reference cycle that the collector
        # breaks only now and then, and it holds ``out``: hand back the
        # messages, not that list (a paged read would keep every page).
        read, out[:] = out[:], []
        return read

    async def scan(self, filter_: str, each: Callable[[Stored], object], after: int = 0,
                   limit: int | None = None) -> None:
        """``each`` of the messages ``read`` gives, in order, as they come: none
        of them kept here.

        Read by batched direct gets (``next_by_subj``, ``batch``): a page of the
        messages on the filter from a sequence, answered by any replica. A
        reader needs no consumer, so no reader can create, change or use up
        consumers (casino.nats.permissions). A replica a moment behind gives a read a
        moment old; every append is guarded at the leader, so such a read
        costs a retry, never a wrong record."""
        def stored(seq: int, subject: str, headers: dict[str, str], data: bytes) -> None:
            each(read_stored(seq, subject, data, headers.get("Nats-Msg-Id", "")))

        await self.scan_raw(filter_, stored, after, limit)

    async def scan_raw(self, filter_: str, each: Callable[[int, str, dict[str, str], bytes], object],
                       after: int = 0, limit: int | None = None) -> None:
        """``scan`` of the stream's messages as stored: ``each(seq, subject, headers, data)``."""
        seq, taken = after + 1, 0
        while limit is None or taken < limit:
            page = READ_PAGE if limit is None else min(READ_PAGE, limit - taken)
            got, last, pending = await self._page_when_served(filter_, seq, page, each)
            taken += got
            if not got or not pending:
                return
            seq = last + 1

    async def _page_when_served(self, filter_: str, seq: int, batch: int,
                                each: Callable[[int, str, dict[str, str], bytes], object]) -> tuple[int, int, int]:
        """``_page``, asked again while nobody serves direct gets yet (a server
        just started, reading its store back; a stream's new leader): for
        ``READ_STALL`` seconds at most."""
        deadline = asyncio.get_running_loop().time() + READ_STALL
        while True:
            try:
                return await self._page(filter_, seq, batch, each)
            except APIError as exc:
                if exc.code != NO_RESPONDERS or asyncio.get_running_loop().time() > deadline:
                    raise
            await asyncio.sleep(0.1)

    async def _page(self, filter_: str, seq: int, batch: int,
                    each: Callable[[int, str, dict[str, str], bytes], object]) -> tuple[int, int, int]:
        """One batched direct get: how many messages came, the last one's
        sequence, and how many more are on the filter after it."""
        got, last, pending = 0, 0, 0
        failed: list[Exception] = []
        done = asyncio.Event()

        async def take(m: Msg) -> None:
            nonlocal got, last, pending
            headers = m.headers or {}
            status = headers.get("Status")
            if status is not None:
                if status not in ("204", "404"):
                    failed.append(APIError(code=int(status), description=headers.get("Description", "")))
                pending = int(headers.get("Nats-Num-Pending", 0)) if status == "204" else 0
                done.set()
                return
            if failed:
                return
            got += 1
            last = int(headers["Nats-Sequence"])
            try:
                each(last, headers["Nats-Subject"], headers, m.data)
            except Exception as exc:  # an undecodable event, or one refused: the reader is told, not left waiting
                failed.append(exc)

        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox, cb=take)
        try:
            request = json.dumps({"seq": seq, "next_by_subj": filter_, "batch": batch}).encode()
            await self.nc.publish(f"$JS.API.DIRECT.GET.{self.stream}", request, reply=inbox)
            while not done.is_set():  # however long a page is, the read goes on while messages come
                had = got
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), timeout=READ_STALL)
                if not done.is_set() and got == had:
                    raise TimeoutError(f"reading {filter_}: no message for {READ_STALL:.0f} s")
        finally:
            await sub.unsubscribe()
        if failed:
            raise failed[0]
        return got, last, pending

    async def first(self, filter_: str) -> Stored | None:
        """One direct get (any replica answers): the server finds the first
        message on a wildcard filter from its index of subjects, as for ``last``."""
        try:
            m = await self.js.get_msg(self.stream, seq=1, subject=filter_, next=True, direct=True)
        except NotFoundError:
            return None
        return _stored(m)

    async def last(self, filter_: str) -> Stored | None:
        """One direct get (any replica answers): the server finds the latest
        message on a wildcard filter from its index of subjects, without
        reading the history."""
        try:
            m = await self.js.get_last_msg(self.stream, filter_, direct=True)
        except NotFoundError:
            return None
        return _stored(m)

    async def tables(self) -> list[str]:
        """Every table with events in the store, from the subjects its shoe
        events between coups are filed under (a few per shoe; a table's first
        shuffle is one)."""
        return sorted({tokens(subject)[0] for subject in await self.subjects(f"{EVENTS}.*.*.{NO_COUP}.shoe")})

    async def subjects(self, filter_: str) -> list[str]:
        """The stream's subjects on ``filter_``, asked for page by page as the server hands them out."""
        found: set[str] = set()
        offset = 0
        while True:
            request = {"subjects_filter": filter_, "offset": offset}
            reply = await self.nc.request(f"$JS.API.STREAM.INFO.{self.stream}", json.dumps(request).encode(), timeout=10)
            info = json.loads(reply.data)
            if "error" in info:
                raise APIError.from_error(info["error"])
            page = (info.get("state") or {}).get("subjects") or {}
            found.update(page)
            offset += len(page)
            if not page or offset >= info.get("total", 0):
                return sorted(found)


def _stored(m: RawStreamMsg) -> Stored:
    return read_stored(m.seq or 0, m.subject or "", m.data or b"", (m.headers or {}).get("Nats-Msg-Id", ""))
