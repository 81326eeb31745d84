"""Which services the floor shows as down, and which as dying again and
again, from the live bucket (``services.ownership``): each instance of a
service renews its membership there, and the server removes one a lapse
after its last renewal."""

from __future__ import annotations

import time
from collections.abc import Callable

from nats.aio.client import Client

from casino.nats.permissions import LIVE
from casino.store.jetstream import JetStreamEventStore

SERVICES = ("shoe", "wager", "dealer-policy", "settlement", "projections", "archiver")
# A service of which RESTARTS_MOST instances started within RESTARTS_WITHIN seconds keeps dying: the floor says so
# (a launcher or Kubernetes starts it again each time, each a new instance; a rolling update of three replicas is
# three, once).
RESTARTS_MOST, RESTARTS_WITHIN = 4, 600.0


class Liveness:
    """The services with no live instance (``down``), and those that keep
    dying (``restarting``), as of the last ``look``; ``on_started`` is told
    of each instance seen starting after the first look."""

    def __init__(self, nc: Client) -> None:
        self.members = JetStreamEventStore(nc, f"KV_{LIVE}")  # the live bucket's entries, as stored
        self.down: list[str] = []
        self.restarting: list[str] = []
        self.seen: set[str] | None = None  # every instance seen live (None before the first look)
        self.started: dict[str, dict[str, float]] = {}  # each service's instances first seen since, and when
        self.on_started: Callable[[str], None] = lambda service: None

    async def look(self) -> bool:
        """Which services have no live instance (no membership or lease in the
        live bucket), and which keep restarting (an instance started since the
        first look is a new membership); whether either changed."""
        live: set[str] = set()

        def member(seq: int, subject: str, headers: dict[str, str], data: bytes) -> None:
            if "KV-Operation" not in headers:  # not a deletion
                live.add(subject.split(".", 2)[2])

        await self.members.scan_raw(f"$KV.{LIVE}.>", member)
        now = time.monotonic()
        for key in live - (self.seen if self.seen is not None else live):
            service = key.split(".")[0]
            if service in SERVICES:
                self.started.setdefault(service, {})[key] = now
                self.on_started(service)
        for instances in self.started.values():
            for key in [k for k, at in instances.items() if now - at > RESTARTS_WITHIN]:
                del instances[key]
        self.seen = live | {key for instances in self.started.values() for key in instances}  # bounded
        restarting = [s for s in SERVICES if len(self.started.get(s, ())) >= RESTARTS_MOST]
        down = [s for s in SERVICES if s not in {key.split(".")[0] for key in live}]
        changed = (down, restarting) != (self.down, self.restarting)
        self.down, self.restarting = down, restarting
        return changed
