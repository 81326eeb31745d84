"""Connecting to NATS: nats-py's client, with its message headers parsed
quicker.

Every event in the stream carries the headers it was appended with (its
message id and the expected sequence the append was guarded on), so every
message a service follows, and every message a replay or a verification
reads, has its headers parsed. nats-py 2.16 tests each header name for
whitespace a character at a time through a generator: about 14 µs for the
four headers of an event, a seventh of a verification's time in one process
(`bench.replay`). The names are a handful, the same on every message, so
here each is checked once; the result is the same dictionary."""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import unquote, urlsplit

import nats
from nats.aio.client import Client

_CRLF = b"\r\n"


@functools.lru_cache(maxsize=256)  # a server sending endless new names is not served from memory
def _name(raw: bytes) -> str | None:
    """A header line's name as nats-py gives it, or None where nats-py skips
    the line (a name not ASCII, or with whitespace inside it)."""
    try:
        name = raw.strip().decode("ascii")
    except UnicodeDecodeError:
        return None
    return None if any(c.isspace() for c in name) else name


def parse_header_lines(raw: bytes) -> dict[str, str]:
    """What ``nats.aio.client.Client._parse_header_lines`` gives for ``raw``
    (``Name: Value`` lines, CRLF-separated), each name checked once."""
    out: dict[str, str] = {}
    for line in raw.split(_CRLF):
        if not line:
            continue
        raw_name, sep, value = line.partition(b":")
        if not sep:
            continue
        name = _name(raw_name)
        if name is not None:
            out[name] = value.strip().decode("utf-8", "replace")
    return out


def quicker(nc: Client) -> Client:
    """``nc``, parsing the headers of the messages it receives with ``parse_header_lines``."""
    nc._parse_header_lines = parse_header_lines  # type: ignore[method-assign]
    return nc


def inbox_prefix(servers: str | list[str]) -> str:
    """``_INBOX.<user>`` for a URL that names its user (each user may receive
    under its own prefix only: casino.natsauth), nats-py's ``_INBOX`` otherwise."""
    first = servers if isinstance(servers, str) else servers[0]
    user = unquote(urlsplit(first.split(",")[0]).username or "")
    return f"_INBOX.{user}" if user else "_INBOX"


async def connect(servers: str | list[str] = "nats://localhost:4222", **options: Any) -> Client:
    """``nats.connect`` with the user's own inbox prefix, and the headers parsed quicker."""
    options.setdefault("inbox_prefix", inbox_prefix(servers))
    return quicker(await nats.connect(servers, **options))
