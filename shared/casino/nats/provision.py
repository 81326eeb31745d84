"""Provisioning, the administrator's alone and once: the event stream, the
shoe's secrets, the dead letters and the read models' buckets. No service
creates a stream or a bucket (casino.nats.permissions gives none the right)."""

from __future__ import annotations

from nats.aio.client import Client

from casino.readmodels.projections import KvProjections
from casino.store.jetstream import STREAM, ensure_streams


async def provision(nc: Client, replicas: int = 1, upgrade: bool = False) -> None:
    """Create what does not exist yet (idempotent); with ``upgrade``, a store
    of an earlier release's event stream is compressed from then on."""
    js = nc.jetstream()
    await ensure_streams(js, replicas, upgrade)
    await KvProjections.create(js, replicas)


async def require_provisioned(nc: Client) -> None:
    """A clear error where the administrator has not provisioned the store."""
    from nats.js.errors import NotFoundError

    try:
        await nc.jetstream().stream_info(STREAM)
    except NotFoundError:
        raise RuntimeError(f"the event stream {STREAM} is missing: the administrator provisions it "
                           "(`casino run` does, or casino.nats.provision)") from None
