"""Signed-in browsers' sessions, kept on the server: in the web's own
key-value bucket (``SESSIONS``), so that any instance of the web answers any
browser, a sign-out ends a session everywhere at once, and a session ends
when its user's password changes. The cookie holds a random token; the
bucket holds only the token's hash, so a reader of the bucket holds no
cookie. Each entry lapses with the session (the bucket's age limit)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import time
from pathlib import Path
from typing import Any

import msgspec
from nats.js.errors import KeyNotFoundError

from casino.nats.permissions import WEB_SESSIONS
from casino.nats.provision import SESSION_SECONDS
from services.web.accounts import ROLES, Accounts, read_accounts

SESSIONS = WEB_SESSIONS  # the bucket (casino.nats.provision.sessions_config)


class Session(msgspec.Struct, frozen=True):
    user: str
    role: str
    expires: float
    password: str  # a fingerprint of the password's hash when the session began: a new password ends it


class AccountsFile:
    """The accounts as their file holds them now: read again when it changes
    (an administrator's new password; in Kubernetes, the Secret updated)."""

    def __init__(self, path: Path | None = None, accounts: Accounts | None = None) -> None:
        self.path = path
        self.accounts = accounts if accounts is not None else read_accounts(path) if path else Accounts("")
        self.stamp = self._stamp()

    def _stamp(self) -> tuple[int, int] | None:
        if self.path is None:
            return None
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def current(self) -> Accounts:
        if self.path is not None and (stamp := self._stamp()) != self.stamp and stamp is not None:
            with contextlib.suppress(Exception):  # a file half written: the accounts as they were, until whole
                self.accounts, self.stamp = read_accounts(self.path), stamp
        return self.accounts


def fingerprint(accounts: Accounts, user: str) -> str:
    account = accounts.users.get(user)
    return "" if account is None else hashlib.sha256(account.scrypt.encode()).hexdigest()[:16]


def _key(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Sessions:
    """The sessions of the web's users, in the bucket ``kv`` (nats-py's KeyValue)."""

    def __init__(self, kv: Any, accounts: AccountsFile) -> None:
        self.kv, self.accounts = kv, accounts
        self.reading: dict[str, asyncio.Future[bytes | None]] = {}  # each key's read under way

    async def _entry(self, key: str) -> bytes | None:
        """The bucket's entry for ``key`` (None if it has none). Requests that
        ask for one key while it is being read share that read: a flood of
        requests bearing one cookie costs the bucket one read at a time, not
        one a request (each is then refused by its own bounds, not by the
        bucket's timeouts)."""
        reading = self.reading.get(key)
        if reading is None:
            reading = self.reading[key] = asyncio.ensure_future(self._read(key))
            reading.add_done_callback(lambda done: self._read_done(key, done))
        return await asyncio.shield(reading)

    async def _read(self, key: str) -> bytes | None:
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            return None
        return entry.value or None

    def _read_done(self, key: str, done: asyncio.Future[bytes | None]) -> None:
        if self.reading.get(key) is done:
            del self.reading[key]
        if not done.cancelled():
            done.exception()  # retrieved here too: every request that waited for it may have gone

    async def begin(self, user: str, role: str) -> str:
        """A new session for ``user``: its token, for the cookie."""
        token = secrets.token_urlsafe(32)
        session = Session(user, role, time.time() + SESSION_SECONDS, fingerprint(self.accounts.current(), user))
        await self.kv.put(_key(token), msgspec.json.encode(session))
        return token

    async def who(self, token: str) -> tuple[str, str] | None:
        """The user and role of a live session, None for a token that names
        none (never given, ended, lapsed, or its password changed since)."""
        if not token or len(token) > 128 or not token.isascii():
            return None
        value = await self._entry(_key(token))
        if value is None:
            return None
        try:
            session = msgspec.json.decode(value, type=Session)
        except msgspec.DecodeError:
            return None
        accounts = self.accounts.current()
        account = accounts.users.get(session.user)
        if session.expires <= time.time() or account is None or account.role != session.role or \
                session.role not in ROLES or fingerprint(accounts, session.user) != session.password:
            return None
        return session.user, session.role

    async def end(self, token: str) -> None:
        if token and len(token) <= 128 and token.isascii():
            await self.kv.purge(_key(token))
