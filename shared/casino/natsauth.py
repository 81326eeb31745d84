"""The NATS permission model: each service its own user, allowed to publish
only its own events and replies and to subscribe only to what it consumes; a
table terminal may command only its own table; anonymous clients are refused.

``server_config`` writes it as nats-server configuration (used by `make run`
and the tests); the Kubernetes overlays carry the same model in the NATS Helm
values (k8s/nats/values.yaml).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from casino.projections import BUCKETS, META

STREAMS = ("CASINO",)
# What any JetStream client of ours needs to read the event stream and follow it.
_READ_EVENTS = [
    "$JS.API.INFO", "$JS.API.STREAM.INFO.CASINO", "$JS.API.CONSUMER.*.CASINO", "$JS.API.CONSUMER.*.CASINO.>",
    "$JS.API.CONSUMER.DURABLE.CREATE.CASINO.>", "$JS.API.CONSUMER.MSG.NEXT.CASINO.>",
    "$JS.API.DIRECT.GET.CASINO.>", "$JS.API.STREAM.MSG.GET.CASINO", "$JS.ACK.CASINO.>", "$JS.FC.>",
    "$JS.API.STREAM.INFO.CASINO_SHOE_SECRETS",
]
_COMMANDS = "casino.cmd.*.{}"
# Every consumer may file what it cannot handle as a dead letter.
_READ_EVENTS += ["casino.dlq.>", "$JS.API.STREAM.INFO.CASINO_DLQ"]


def _events(aggregate: str) -> str:
    return f"casino.ev.*.*.*.{aggregate}"


def permissions(tables: Iterable[str]) -> dict[str, dict[str, object]]:
    """Publish and subscribe permissions of every user."""
    kv = ["$JS.API.STREAM.NAMES"]
    for bucket in (*BUCKETS.values(), META):  # a wildcard is a whole token, so each bucket by name
        stream = f"KV_{bucket}"
        kv += [f"$KV.{bucket}.>", f"$JS.API.STREAM.INFO.{stream}", f"$JS.API.STREAM.CREATE.{stream}",
               f"$JS.API.DIRECT.GET.{stream}.>", f"$JS.API.STREAM.MSG.GET.{stream}", f"$JS.API.CONSUMER.*.{stream}",
               f"$JS.API.CONSUMER.*.{stream}.>", f"$JS.API.CONSUMER.MSG.NEXT.{stream}.>"]
    perms: dict[str, dict[str, object]] = {
        "shoe": {"publish": [_events("shoe"), "casino.secret.>", *_READ_EVENTS,
                             "$JS.API.DIRECT.GET.CASINO_SHOE_SECRETS.>", "$JS.API.STREAM.MSG.GET.CASINO_SHOE_SECRETS"],
                 "subscribe": [_COMMANDS.format("shoe"), "_INBOX.>"]},
        "wager": {"publish": [_events("wager"), *_READ_EVENTS],
                  "subscribe": [_COMMANDS.format("wager"), _COMMANDS.format("book"), "_INBOX.>"]},
        # The dealer-policy alone opens and closes wager books.
        "dealer-policy": {"publish": [_events("coup"), _COMMANDS.format("shoe"), _COMMANDS.format("book"),
                                      *_READ_EVENTS],
                          "subscribe": [_COMMANDS.format("coup"), "_INBOX.>"]},
        "settlement": {"publish": [_events("settle"), *_READ_EVENTS], "subscribe": ["_INBOX.>"]},
        "projections": {"publish": [*_READ_EVENTS, *kv], "subscribe": ["_INBOX.>"]},
        # The floor's simulator and console: every table's terminal commands, and the live events.
        "floor": {"publish": [_COMMANDS.format("coup"), _COMMANDS.format("wager"), *_READ_EVENTS, *kv],
                  "subscribe": ["_INBOX.>", "casino.ev.>"]},
        # Compliance: replay and verification read everything and write nothing but their read models.
        "compliance": {"publish": [*_READ_EVENTS, *kv], "subscribe": ["_INBOX.>"]},
        "admin": {"publish": [">"], "subscribe": [">"]},
    }
    for table in tables:
        perms[f"terminal-{table}"] = {"publish": [f"casino.cmd.{table}.coup", f"casino.cmd.{table}.wager"],
                                      "subscribe": ["_INBOX.>"]}
    return perms


def passwords(users: Iterable[str]) -> dict[str, str]:
    return {u: secrets.token_urlsafe(18) for u in users}


def server_config(perms: dict[str, dict[str, object]], passwords_: dict[str, str]) -> str:
    """nats-server configuration: users with passwords and permissions, no anonymous access."""
    users = []
    for user, p in perms.items():
        allow = {"publish": {"allow": p["publish"]}, "subscribe": {"allow": p["subscribe"]}}
        if user in ("shoe", "wager", "dealer-policy"):
            allow["allow_responses"] = True  # type: ignore[assignment]
        users.append({"user": user, "password": passwords_[user], "permissions": allow})
    return "authorization " + json.dumps({"users": users}, indent=2) + "\n"


def with_credentials(url: str, user: str, password: str) -> str:
    parts = urlsplit(url)
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{parts.hostname}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


AUTH_FILE = "nats-auth.json"
CONFIG_FILE = "nats.conf"


def local_auth(var: Path, tables: Iterable[str]) -> dict[str, str]:
    """The users and passwords of the embedded server under ``var`` (made once,
    kept with owner-only access), and its configuration file written anew."""
    path = var / AUTH_FILE
    perms = permissions(tables)
    known: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
    pw = {**passwords(u for u in perms if u not in known), **known}
    path.write_text(json.dumps(pw))
    path.chmod(0o600)
    conf = var / CONFIG_FILE
    conf.write_text(server_config(perms, pw))
    conf.chmod(0o600)
    return pw


# Each node's memory holds an index entry for every subject the stream keeps
# (about 1.2 KiB a coup kept: README, Sizing the nats-server); 16 GiB with the
# collector's soft limit at 14 GiB outlasts the values' 50 Gi volume at the
# README's example casino. Requests equal to limits: the node is not evicted first.
NATS_RESOURCES = {"cpu": "2", "memory": "16Gi"}
NATS_GOMEMLIMIT = "14GiB"
# A node restarting reads its store back before it answers its health check,
# in time that grows with the history (after a crash it rebuilds every block's
# index): 0.11 to 0.14 ms a coup kept on the development machine, 22 to 28
# minutes for the coups 14 GiB holds. The chart's startup probe gives up after
# 15 minutes (90 checks 10 s apart) and restarts the node, again and again; an
# hour's budget (README: Sizing the nats-server).
NATS_STARTUP_CHECKS = 360


def helm_values(tables: Iterable[str]) -> dict[str, object]:
    """Values for the official NATS Helm chart: a 3-node JetStream cluster with
    TLS, the Prometheus exporter, and this permission model, each password
    taken from the environment of the NATS pods (``$CASINO_<USER>_PASSWORD``,
    from a Secret)."""
    users = []
    for user, p in permissions(tables).items():
        allow: dict[str, object] = {"publish": {"allow": p["publish"]}, "subscribe": {"allow": p["subscribe"]}}
        if user in ("shoe", "wager", "dealer-policy"):
            allow["allow_responses"] = True
        env = "CASINO_" + user.upper().replace("-", "_") + "_PASSWORD"
        users.append({"user": user, "password": f"<< ${env} >>", "permissions": allow})
    return {
        "config": {
            "cluster": {"enabled": True, "replicas": 3},
            "jetstream": {"enabled": True, "fileStore": {"enabled": True, "pvc": {"size": "50Gi"}}},
            "nats": {"tls": {"enabled": True, "secretName": "nats-server-tls"}},
            "merge": {"authorization": {"users": users}},
        },
        "container": {
            "env": {
                **{"CASINO_" + u.upper().replace("-", "_") + "_PASSWORD": {
                    "valueFrom": {"secretKeyRef": {"name": "nats-users", "key": u}}} for u in permissions(tables)},
                # The Go collector's soft limit, under the container's: it collects harder
                # as the server nears it rather than letting the kernel kill the node.
                "GOMEMLIMIT": NATS_GOMEMLIMIT},
            "merge": {"resources": {"requests": dict(NATS_RESOURCES), "limits": dict(NATS_RESOURCES)},
                      "startupProbe": {"failureThreshold": NATS_STARTUP_CHECKS}}},
        "promExporter": {"enabled": True, "podMonitor": {"enabled": True}},
        "podTemplate": {"topologySpreadConstraints": {"kubernetes.io/hostname": {
            "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}}},
    }
