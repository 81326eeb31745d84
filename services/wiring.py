"""What a service is to the runner (``services.runner.Running``), each
service saying it in its own ``services/<x>/app.py`` as ``WIRING``: the
subjects it answers and sends, how it is made once connected, what it
follows beside its commands, and what it does as it takes tables and as it
stops. The runner imports no service: it finds a service's wiring by its
kind (``of``)."""

from __future__ import annotations

import abc
import importlib
from collections.abc import Coroutine
from typing import Any, ClassVar, NamedTuple, Protocol

from faststream.nats import NatsBroker
from nats.aio.client import Client

from casino.config.tables import TableConfig
from casino.metrics import Metrics
from casino.protocol import commands
from casino.protocol.service import Clock
from casino.store.jetstream import JetStreamEventStore
from services.followers import Sole


class Lane(NamedTuple):
    """A command subject a service answers: its last token, its queue group,
    the commands it takes, what it takes them for, and their decoder."""

    token: str
    queue: str
    accepted: Any
    description: str
    decoder: Any


class Sent(NamedTuple):
    """A subject a service sends on (for the AsyncAPI document: never published through)."""

    subject: str
    schema: Any
    description: str


# Every command's reply, to the requester's inbox (what the command subjects' services send).
REPLIES = Sent("_INBOX.{requester}.>", commands.Reply, "Every command's reply, to the requester's inbox: done, or "
               "refused with the clause that refuses it. A refusal for one of the clauses "
               f"{', '.join(sorted(commands.ASK_AGAIN))} is for the terminal to ask the same command (the same id) "
               "again a moment later; every other refusal stands.")
EVENTS = "casino.ev.{table}.{shoe}.{coup}"


class Host(Protocol):
    """What a wiring is given of the running service."""

    kind: str
    broker: NatsBroker
    metrics: Metrics
    durables: list[str]
    service: Any
    tables: dict[str, TableConfig]
    clock: Clock
    options: dict[str, Any]  # what a test gives a service of its own (the shoe's shuffle)


class Wiring(abc.ABC):
    """A service's wiring: by default one that answers commands and follows nothing else."""

    kind: ClassVar[str]
    lanes: ClassVar[tuple[Lane, ...]] = ()
    sends: ClassVar[tuple[Sent, ...]] = ()
    secrets: ClassVar[bool] = False  # whether it needs the secret orders' stream provisioned

    def __init__(self, host: Host) -> None:
        self.host = host

    @abc.abstractmethod
    async def make(self, nc: Client, store: JetStreamEventStore) -> Any:
        """The service, once connected (before any message arrives)."""

    def sole(self) -> Sole | None:
        """The consumer its instances share, taken by one at a time (settlement's, the archiver's)."""
        return None

    def tasks(self) -> list[Coroutine[Any, Any, None]]:
        """What runs beside the service once it has started."""
        return []

    def took(self, service: Any, parts: set[int]) -> None:  # noqa: B027 (a hook: nothing by default)
        """The tables of ``parts`` taken, their commands not yet subscribed."""

    async def finishing(self, service: Any) -> None:  # noqa: B027 (a hook: nothing by default)
        """Its commands no longer taken: the work in hand finished."""

    async def close(self) -> None:  # noqa: B027 (a hook: nothing by default)
        """The last of its stop."""

    @classmethod  # noqa: B027 (a hook: nothing by default)
    def document(cls, broker: NatsBroker) -> None:
        """What ``faststream docs gen`` shows beyond its command subjects."""


def of(kind: str) -> type[Wiring]:
    """The wiring of the service ``kind`` (``dealer-policy``: ``services.dealer_policy.app.WIRING``)."""
    try:
        module = importlib.import_module(f"services.{kind.replace('-', '_')}.app")
        wiring: type[Wiring] = module.WIRING
    except (ModuleNotFoundError, AttributeError):
        raise ValueError(f"unknown service {kind!r}") from None
    return wiring

