"""Provisioning, the administrator's alone and once: the event stream, the
shoe's secrets, the dead letters, the read models' buckets and the owners' bucket. No service
creates a stream or a bucket (casino.nats.permissions gives none the right)."""

from __future__ import annotations

from nats.aio.client import Client
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import BucketNotFoundError

from casino.nats.permissions import LIVE, OWNERS, WEB_SESSIONS
from casino.readmodels.projections import KvProjections
from casino.store.jetstream import ensure_streams, require_declared, secrets_config, stream_config


async def provision(nc: Client, replicas: int = 1, casino: str = "") -> None:
    """Create what does not exist yet, as declared (idempotent), the event
    stream recording the casino's name; change nothing that exists (a stream
    that differs, or is another casino's record, is refused: a migration)."""
    js = nc.jetstream()
    await ensure_streams(js, replicas, casino)
    await KvProjections.create(js, replicas)
    for config in (KeyValueConfig(bucket=OWNERS, history=1, direct=True, replicas=replicas), live_config(replicas),
                   sessions_config(replicas)):
        try:
            await js.key_value(config.bucket)
        except BucketNotFoundError:  # which instance of each service owns which tables, who is live, who signed in
            await js.create_key_value(config)


# The live bucket's entries (memberships, leases) last as long as the server keeps them: LAPSE
# seconds after each was written (services.ownership), in a bounded room (a flood of entries is
# refused, and lapses with it). On file: a bucket in memory is gone with its server, and nobody but
# the administrator may make it again.
LIVE_LAPSE = 6.0
LIVE_BYTES = 1 << 20


def live_config(replicas: int = 1) -> KeyValueConfig:
    return KeyValueConfig(bucket=LIVE, history=1, ttl=LIVE_LAPSE, storage=StorageType.FILE, max_bytes=LIVE_BYTES,
                          direct=True, replicas=replicas)


# The web's sessions (services.web.sessions), each gone with its cookie's lifetime, in a bounded room.
SESSION_SECONDS = 8 * 3600
SESSIONS_BYTES = 64 << 20


def sessions_config(replicas: int = 1) -> KeyValueConfig:
    return KeyValueConfig(bucket=WEB_SESSIONS, history=1, ttl=SESSION_SECONDS, storage=StorageType.FILE,
                          max_bytes=SESSIONS_BYTES, direct=True, replicas=replicas)


async def require_provisioned(nc: Client, secrets: bool = False) -> None:
    """A clear error where the administrator has not provisioned the store, or
    the event stream (and, for the shoe service, ``secrets``: the secret
    orders' stream) is not as declared: a service does not write into a
    stream that copies what it is given elsewhere or lets it go."""
    from nats.js.errors import NotFoundError

    js = nc.jetstream()
    for declared in (stream_config(), *([secrets_config()] if secrets else [])):
        try:
            info = await js.stream_info(declared.name or "")
        except NotFoundError:
            raise RuntimeError(f"the stream {declared.name} is missing: the administrator provisions it "
                               "(`casino run` does, or casino.nats.provision)") from None
        require_declared(info.config, declared)
