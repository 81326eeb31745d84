"""The connections an instance of the web holds, bounded so that a flood of
them never shuts out the pit: ``per_address`` from one client address and
``most`` in all. A connection beyond a bound makes room by closing an idle
one (between requests, or still short of its first), the oldest of the
address holding the most; only when none is idle is the new one closed.
A flood of idle connections thus takes its own connections' places, and
the health checks and the pit's pages are answered throughout.

Behind a proxy (``forwarded_allow_ips``) every connection comes from the
proxy's address: the bound by address is then the proxy's to keep (the
Ingress's ``limit-connections``, k8s/base/web.yaml), and the bound in all
is kept here."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, MutableMapping
from typing import Any

CONNECTIONS_MOST = 8000  # connections one instance holds at once
CONNECTIONS_PER_ADDRESS = 256  # from one client address (a pit's screens behind one address, each a few)

Peer = tuple[str, int]


class Connections:
    """Each connection open, oldest first, with whether a request is in hand on it."""

    def __init__(self, most: int = CONNECTIONS_MOST, per_address: int | None = CONNECTIONS_PER_ADDRESS) -> None:
        self.most, self.per_address = most, per_address
        self.open: dict[Peer, asyncio.BaseTransport] = {}
        self.by_address: dict[str, dict[Peer, None]] = {}
        self.busy: dict[Peer, int] = {}  # requests in hand on the connection
        self.closed_for_room = 0

    def made(self, peer: Peer, transport: asyncio.BaseTransport) -> bool:
        """A connection made: room made for it if a bound is reached (False: none could be, it is to be closed)."""
        crowded = self.per_address is not None and len(self.by_address.get(peer[0], ())) >= self.per_address
        if crowded and not self._close_idle(peer[0]):
            return False
        if len(self.open) >= self.most:
            for address in sorted(self.by_address, key=lambda a: -len(self.by_address[a])):
                if self._close_idle(address):
                    break
            else:
                return False
        self.open[peer] = transport
        self.by_address.setdefault(peer[0], {})[peer] = None
        return True

    def lost(self, peer: Peer) -> None:
        if self.open.pop(peer, None) is not None:
            held = self.by_address[peer[0]]
            held.pop(peer, None)
            if not held:
                del self.by_address[peer[0]]
        self.busy.pop(peer, None)

    def _close_idle(self, address: str) -> bool:
        """Closes the oldest idle connection from ``address`` (False: it has none)."""
        idle = next((p for p in self.by_address.get(address, ()) if not self.busy.get(p)), None)
        if idle is None:
            return False
        transport = self.open[idle]
        self.lost(idle)
        transport.close()
        self.closed_for_room += 1
        return True


class Tracked:
    """ASGI middleware, outermost: marks each connection busy while a request
    is in hand on it (a live stream is a request in hand), by the address and
    port it came from (before a proxy's headers name another)."""

    def __init__(self, app: Callable[..., Any], connections: Connections) -> None:
        self.app, self.connections = app, connections

    async def __call__(self, scope: MutableMapping[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        client = scope.get("client")
        peer = (str(client[0]), int(client[1])) if client else None
        if peer is None or peer not in self.connections.open:
            await self.app(scope, receive, send)
            return
        busy = self.connections.busy
        busy[peer] = busy.get(peer, 0) + 1
        try:
            await self.app(scope, receive, send)
        finally:
            if peer in busy:
                busy[peer] -= 1
