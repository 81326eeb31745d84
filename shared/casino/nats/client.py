"""Connecting to NATS with the user's own inbox prefix: each user may receive
replies and deliveries under ``_INBOX.<user>`` only (casino.nats.permissions)."""

from __future__ import annotations

import os
import ssl
from typing import Any
from urllib.parse import unquote, urlsplit

import nats
from nats.aio.client import Client


def inbox_prefix(servers: str | list[str]) -> str:
    """``_INBOX.<user>`` for a URL that names its user, nats-py's ``_INBOX`` otherwise."""
    first = servers if isinstance(servers, str) else servers[0]
    user = unquote(urlsplit(first.split(",")[0]).username or "")
    return f"_INBOX.{user}" if user else "_INBOX"


async def connect(servers: str | list[str] = "nats://localhost:4222", **options: Any) -> Client:
    """``nats.connect`` with the user's own inbox prefix, over TLS when
    $CASINO_NATS_CA names the CA that signed the server's certificate."""
    options.setdefault("inbox_prefix", inbox_prefix(servers))
    if "tls" not in options and (ca := os.environ.get("CASINO_NATS_CA")):
        options["tls"] = ssl.create_default_context(cafile=ca)
    return await nats.connect(servers, **options)


async def unheard(exc: Exception) -> None:
    """An ``error_cb`` that prints nothing: for a connection whose failures
    its user is told of otherwise (the command line's one-line refusals,
    the launcher's own account of its server), never as nats-py's traces."""
    return None
