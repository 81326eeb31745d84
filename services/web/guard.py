"""What stands between a hostile browser and the pages: sign-in limited by
client address, and by address and user (``SignInLimits``), a token against cross-site
forms (``CSRF_COOKIE``, checked on every POST), the security headers on
every answer (``Guarded``), and a server that drops a connection whose
request never finishes arriving (``Deadlined``) and bounds its
connections (services.web.connections)."""

from __future__ import annotations

import asyncio
import contextvars
import hmac
import resource
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable, MutableMapping
from functools import partial
from typing import Any

import uvicorn
from prometheus_client import CollectorRegistry, Counter, Gauge
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware
from uvicorn.protocols.http.h11_impl import H11Protocol

from services.web.connections import CONNECTIONS_PER_ADDRESS, Connections, Peer, Tracked

CSRF_COOKIE = "casino_csrf"
CSRF_FIELD = "csrf"
CSRF = contextvars.ContextVar("csrf", default="")  # the form token of the request being answered
# No script but the site's own files, no style but its own sheet, nothing framed, no form sent elsewhere.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
HEADERS = ((b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
           (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY"),
           (b"cross-origin-opener-policy", b"same-origin"), (b"permissions-policy", b"camera=(), microphone=()"))
HSTS = (b"strict-transport-security", b"max-age=31536000")


def over_tls(scope: MutableMapping[str, Any]) -> bool:
    """Whether the browser reached the site over TLS: served so, or behind a
    proxy (the Ingress) that says so. Trusting the header can only make a
    cookie stricter (``Secure``) and the answer stricter (HSTS)."""
    if scope.get("scheme") == "https":
        return True
    return any(k == b"x-forwarded-proto" and v.split(b",")[0].strip() == b"https" for k, v in scope.get("headers", ()))


def cookie_header(name: str, value: str, scope: MutableMapping[str, Any], max_age: int | None = None) -> bytes:
    """A ``Set-Cookie`` value: HttpOnly, SameSite=Strict, on the whole site, Secure over TLS."""
    parts = [f"{name}={value}", "Path=/", "HttpOnly", "SameSite=Strict"]
    if max_age is not None:
        parts.append(f"Max-Age={max_age}")
    if over_tls(scope):
        parts.append("Secure")
    return "; ".join(parts).encode()


def csrf_matches(scope: MutableMapping[str, Any], form: dict[str, str]) -> bool:
    """Whether a form came with the token its browser's cookie holds (a
    site elsewhere can make a browser send the cookie, never read it)."""
    token = scope.get("state", {}).get("csrf_cookie", "")
    return bool(token) and hmac.compare_digest(token, form.get(CSRF_FIELD, ""))


class Guarded:
    """ASGI middleware: every answer gets the security headers (HSTS over
    TLS), and a browser without a form token gets one in a cookie; the token
    is ``request.state.csrf`` for the forms, and what the cookie held,
    ``request.state.csrf_cookie``, for the check."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app

    async def __call__(self, scope: MutableMapping[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held = ""
        for k, v in scope.get("headers", ()):
            if k == b"cookie":
                for part in v.decode("latin-1").split(";"):
                    name, _, value = part.strip().partition("=")
                    if name == CSRF_COOKIE and 20 <= len(value) <= 64 and value.isascii():
                        held = value
        token = held or secrets.token_urlsafe(24)
        state = scope.setdefault("state", {})
        state["csrf"], state["csrf_cookie"] = token, held
        extra = [*HEADERS, *([HSTS] if over_tls(scope) else [])]
        if not held:
            extra.append((b"set-cookie", cookie_header(CSRF_COOKIE, token, scope)))

        async def with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", ())}
                message["headers"] = [*message.get("headers", ()), *((k, v) for k, v in extra
                                                                       if k not in names or k == b"set-cookie")]
            await send(message)

        await self.app(scope, receive, with_headers)


class SignInLimits:
    """Sign-in limited by client address, and by address and user, never by
    user alone: a stranger guessing at a user locks out the stranger's own
    address, not the user. An address is locked while it has failed
    ``client_failures`` times within the last ``window`` seconds, an address
    and user ``pair_failures`` times: a lock lasts as long as the guessing
    goes on, and a ``window`` more. A locked sign-in is refused before its
    password is looked at, so a right guess during a lock opens nothing.
    Attempts from one address are paced besides (``per_second``, ``burst``),
    right or wrong. A user who signed in from an address before (a known
    address) is held to the failures and the pace of that address and user
    alone, so others' guesses from the same address (a shared network's)
    never refuse them. Memory is bounded: the ``most`` addresses, pairs and
    known pairs seen last."""

    def __init__(self, registry: CollectorRegistry, client_failures: int = 5, pair_failures: int = 5,
                 window: float = 60.0, per_second: float = 1.0, burst: int = 5, most: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client_failures, self.pair_failures, self.window = client_failures, pair_failures, window
        self.per_second, self.burst, self.most, self.clock = per_second, burst, most, clock
        self.failures: dict[str, OrderedDict[str, deque[float]]] = {"client": OrderedDict(),
                                                                    "client_and_user": OrderedDict()}
        self.paced: OrderedDict[str, tuple[float, float]] = OrderedDict()  # client (or known pair) -> (tokens, at)
        self.known: OrderedDict[str, None] = OrderedDict()  # the pairs that signed in
        self.outcomes = Counter("casino_web_signins", "Sign-ins, by outcome: signed_in, wrong (user or password), "
                                "locked (the client, or the client and user), paced (too fast from one client)",
                                ["outcome"], registry=registry)
        for outcome in ("signed_in", "wrong", "locked", "paced"):
            self.outcomes.labels(outcome)
        self.locked = Gauge("casino_web_signin_locked", "Client addresses, and addresses with a user, locked out of "
                            "sign-in now, by what is locked", ["by"], registry=registry)
        for by in self.failures:
            self.locked.labels(by).set_function(partial(self._locked_now, by))

    def _recent(self, by: str, key: str) -> deque[float]:
        found = self.failures[by].get(key)
        if found is None:
            return deque()
        cutoff = self.clock() - self.window
        while found and found[0] < cutoff:
            found.popleft()
        return found

    def _locked_now(self, by: str) -> int:
        most = self.client_failures if by == "client" else self.pair_failures
        return sum(len(self._recent(by, key)) >= most for key in list(self.failures[by]))

    @staticmethod
    def _pair(client: str, user: str) -> str:
        return f"{client} {user}"

    def refusal(self, client: str, user: str) -> str:
        """Why this attempt is refused before its password is looked at ("" if it is not)."""
        pair = self._pair(client, user)
        known = pair in self.known
        if len(self._recent("client_and_user", pair)) >= self.pair_failures or (
                not known and len(self._recent("client", client)) >= self.client_failures):
            self.outcomes.labels("locked").inc()
            return "too many wrong sign-ins: wait a minute and try again"
        now = self.clock()
        paced = pair if known else client
        tokens, at = self.paced.get(paced, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.per_second)
        if tokens < 1:
            self.outcomes.labels("paced").inc()
            return "sign-ins come too fast from your address: wait a moment"
        self._keep(self.paced, paced, (tokens - 1, now))
        return ""

    def failed(self, client: str, user: str) -> None:
        self.outcomes.labels("wrong").inc()
        now = self.clock()
        for by, key in (("client", client), ("client_and_user", self._pair(client, user))):
            self._keep(self.failures[by], key, self._recent(by, key))
            self.failures[by][key].append(now)

    def signed_in(self, client: str, user: str) -> None:
        self.outcomes.labels("signed_in").inc()
        self._keep(self.known, self._pair(client, user), None)

    def _keep(self, kept: OrderedDict[str, Any], key: str, value: Any) -> None:
        kept[key] = value
        kept.move_to_end(key)
        while len(kept) > self.most:
            kept.popitem(last=False)


# Seconds a connection may take to send a request's head (its line and headers) before it is dropped.
HEAD_WITHIN = 10.0


class Deadlined(H11Protocol):
    """uvicorn's h11 protocol (``uvicorn.Config(http=...)``), with a deadline
    for the head of the first request on each connection: one still short of
    its blank line after ``HEAD_WITHIN`` seconds is closed, so that a crowd of
    unfinished requests holds no socket for long. Later requests on a kept
    connection are bounded by uvicorn's keep-alive timeout between them.
    Each connection is counted in ``bounds`` (its server's), which may
    close an idle one to make room for it, or close it."""

    bounds: Connections | None = None  # (uvicorn's own ``connections`` is the server's set of them)
    head_within = HEAD_WITHIN

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._socket, self._head, self._head_done = transport, b"", False
        self._deadline = asyncio.get_running_loop().call_later(self.head_within, self._too_slow)
        peer = transport.get_extra_info("peername")
        self._peer: Peer | None = (str(peer[0]), int(peer[1])) if peer and len(peer) >= 2 else None
        if self.bounds is not None and self._peer is not None and not self.bounds.made(self._peer, transport):
            transport.close()

    def data_received(self, data: bytes) -> None:
        if not self._head_done:
            self._head = (self._head + data)[-4096:]
            if b"\r\n\r\n" in self._head:
                self._head_done, self._head = True, b""
                self._deadline.cancel()
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._deadline.cancel()
        if self.bounds is not None and self._peer is not None:
            self.bounds.lost(self._peer)
        super().connection_lost(exc)

    def _too_slow(self) -> None:
        if not self._head_done and not self._socket.is_closing():
            self._socket.close()


def server(app: Any, host: str, port: int, forwarded_allow_ips: str = "",
           connections: Connections | None = None, head_within: float = HEAD_WITHIN) -> uvicorn.Server:
    """The web's HTTP server: connections bounded by address and in all
    (``Connections``: an idle one closed first to make room; the process
    allowed the files for them), each request's head due within
    ``head_within`` seconds, an idle kept connection closed after 5 s. The
    client's address and scheme are taken from the X-Forwarded-For and
    -Proto headers of a proxy at ``forwarded_allow_ips`` alone (behind the
    Ingress: the sign-in limits count each browser, not the proxy); by
    default of none, so that no client chooses the address it is counted
    under."""
    if connections is None:
        connections = Connections(per_address=None if forwarded_allow_ips else CONNECTIONS_PER_ADDRESS)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections.most + 1024 if hard == resource.RLIM_INFINITY else min(hard, connections.most + 1024)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    protocol = type("Bounded", (Deadlined,), {"bounds": connections, "head_within": head_within})
    # uvicorn's bound counts connections and requests in hand: above what the connections' own bounds allow.
    tracked = Tracked(ProxyHeadersMiddleware(app, trusted_hosts=forwarded_allow_ips), connections)
    return uvicorn.Server(uvicorn.Config(tracked, host=host, port=port, log_level="warning", lifespan="off",
                                         http=protocol, limit_concurrency=2 * connections.most + 64,
                                         timeout_keep_alive=5, proxy_headers=False))
