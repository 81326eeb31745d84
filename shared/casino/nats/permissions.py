"""The NATS permission model, in one place: who may publish, subscribe, read
and manage what, and why. ``server_config`` writes it as nats-server
configuration (``make run`` and the tests), ``helm_values`` as the NATS Helm
chart's values (k8s/nats/values.yaml), and docs/security.md is its table.

Accounts. ``CASINO`` holds the event store and every service; each table's
terminal has an account of its own (``TERMINAL_<table>``, with limits on its
connections and subscriptions), which imports only its own table's two
command subjects of those the casino exports (``casino.cmd.<table>.coup`` and
``.wager``); so has each supervisor (``SUPERVISOR_<name>``, importing only
``casino.cmd.*.supervise.<name>``). A request crossing the boundary is
answered on a reply subject the server makes (``_R_.…``), never on one the
terminal or supervisor chose, so none can make a service publish into a
stream, the JetStream API or another user's inbox. Within the casino's
account a service answers only the inbox of a user that may send the
request (``answerable``): no reply lands on a consumer's deliveries.

Every user receives only its own replies: nats-py's inbox prefix is
``_INBOX.<user>`` (``casino.nats.client.connect``) and each user may subscribe
under that prefix only. Readers read the store by direct gets and create no
consumers; only the services that consume create consumers, and only the
settlement service may touch the ``settlement`` durable. Streams and buckets
are created once by the administrator, who alone may manage them, and who
may not read the shoes' secret orders either: no user but the shoe service
can read ``CASINO_SHOE_SECRETS``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import msgspec

from casino.nats import partitions
from casino.nats.server import write_private
from casino.readmodels.projections import BUCKETS, META
from casino.store.subjects import matches

CASINO = "CASINO"
TERMINAL_ACCOUNT = "TERMINAL_"  # each table's terminal in an account of its own: TERMINAL_<table>
# What one table's terminal may hold open at once (a terminal needs one
# connection and one subscription for its replies): one terminal cannot use
# up the server's connections or subscriptions, nor another table's.
TERMINAL_LIMITS = {"max_connections": 4, "max_subscriptions": 16}
SUPERVISOR_ACCOUNT = "SUPERVISOR_"  # each supervisor in an account of its own: SUPERVISOR_<name>
SUPERVISOR_LIMITS = dict(TERMINAL_LIMITS)  # a supervisor's tablet, as bounded as a table's terminal
# Each card-reading table's devices (its card-reading shoe and its shuffling machine) in an account of their
# own, DEVICE_<table>, as bounded as its terminal's: a device that holds every connection it may takes none
# of the terminal's.
DEVICE_ACCOUNT = "DEVICE_"
DEVICE_LIMITS = dict(TERMINAL_LIMITS)
STREAM, SECRETS, DLQ, ARCHIVE = "CASINO", "CASINO_SHOE_SECRETS", "CASINO_DLQ", "CASINO_ARCHIVE"
SETTLEMENT_DURABLE = "settlement"
ARCHIVER_DURABLE = "archiver"
OWNERS = "casino_owners"  # which instance of each service owns which partition of the tables (services.ownership)
# Who is live, for as long as the server says: each instance's membership and the projections' writer's
# lease, every entry removed by the server a lapse after it was written (services.ownership).
LIVE = "casino_live"
# The web's sessions (services.web.sessions): the web alone reads and writes them.
WEB_SESSIONS = "casino_web_sessions"
KV_STREAMS = tuple(f"KV_{bucket}" for bucket in (*BUCKETS.values(), META, OWNERS, LIVE, WEB_SESSIONS))
ARCHIVE_KV = f"KV_{META}"  # where the archiver reads the read models' checkpoint
RESPONDERS = ("shoe", "wager", "dealer-policy")  # they answer requests
SERVICES = ("shoe", "wager", "dealer-policy", "settlement", "projections", "archiver")
# The command subjects the casino exports to the terminals' accounts, and to the supervisors'.
EXPORTED = ("casino.cmd.*.coup", "casino.cmd.*.wager")
# Exported to the devices' accounts: the card-reading shoe's reports, the shuffling machine's orders.
DEVICES_EXPORTED = {"reader": "casino.cmd.*.read", "shuffler": "casino.cmd.*.shuffler"}
SUPERVISED = "casino.cmd.*.supervise.*"


class User(msgspec.Struct, frozen=True):
    """One user's rights, and why it has them."""

    account: str
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    why: str
    deny_publish: tuple[str, ...] = ()
    responds: bool = False


def inbox(user: str) -> str:
    """The inbox prefix of ``user``: its replies, its consumers' deliveries."""
    return f"_INBOX.{user}"


def _events(aggregate: str) -> str:
    return f"casino.ev.*.*.*.{aggregate}"


# Reading the event store: direct gets (a batch of the messages on a filter
# from a sequence, or the last on a subject), and the stream's information.
READ = ("$JS.API.STREAM.INFO.CASINO", "$JS.API.DIRECT.GET.CASINO", "$JS.API.DIRECT.GET.CASINO.>")
# Reading the read models (key-value buckets) the same way.
READ_MODELS = tuple(s for kv in KV_STREAMS if kv not in (f"KV_{OWNERS}", f"KV_{LIVE}", f"KV_{WEB_SESSIONS}") for s in (
    f"$JS.API.STREAM.INFO.{kv}", f"$JS.API.DIRECT.GET.{kv}", f"$JS.API.DIRECT.GET.{kv}.>"))
# Reading the archive of sealed shoes the same way.
READ_ARCHIVE = (f"$JS.API.STREAM.INFO.{ARCHIVE}", f"$JS.API.DIRECT.GET.{ARCHIVE}", f"$JS.API.DIRECT.GET.{ARCHIVE}.>")
# The consumers of their own a consuming service's instances may hold at
# once, under names of its own (``<service>-0`` to ``<service>-7``): no user
# can make more, nor exhaust the server's consumers (services.followers
# claims a free name at an instance's start).
SLOTS = 8


def own_consumers(service: str) -> tuple[str, ...]:
    """Creating, looking at, fetching from and acknowledging the consumers of ``service``'s own, and filing dead
    letters."""
    return (*(subject for k in range(SLOTS) for subject in (
        f"$JS.API.CONSUMER.CREATE.CASINO.{service}-{k}", f"$JS.API.CONSUMER.CREATE.CASINO.{service}-{k}.>",
        f"$JS.API.CONSUMER.INFO.CASINO.{service}-{k}", f"$JS.API.CONSUMER.MSG.NEXT.CASINO.{service}-{k}",
        f"$JS.ACK.CASINO.{service}-{k}.>")), "casino.dlq.>")


def living(service: str) -> tuple[str, ...]:
    """Writing ``service``'s entries of the live bucket (its instances'
    memberships, its leases), and reading the bucket: which entries it holds
    and when the server wrote them is no secret."""
    return (f"$KV.{LIVE}.{service}.*", f"$JS.API.STREAM.INFO.KV_{LIVE}", f"$JS.API.DIRECT.GET.KV_{LIVE}",
            f"$JS.API.DIRECT.GET.KV_{LIVE}.$KV.{LIVE}.{service}.>")


# The web's sessions: written (begun, ended) and read by the web alone.
SESSIONS = (f"$KV.{WEB_SESSIONS}.>", f"$JS.API.STREAM.INFO.KV_{WEB_SESSIONS}",
            f"$JS.API.DIRECT.GET.KV_{WEB_SESSIONS}.>")
# Which instances of every service are live: the live bucket's entries, read (``living`` writes one service's).
LIVENESS = (f"$JS.API.STREAM.INFO.KV_{LIVE}", f"$JS.API.DIRECT.GET.KV_{LIVE}")


def owning(service: str) -> tuple[str, ...]:
    """Reading and writing ``service``'s key of the owners' bucket, and no
    other service's; its instances' memberships in the live bucket."""
    return (f"$KV.{OWNERS}.{service}", f"$JS.API.STREAM.INFO.KV_{OWNERS}",
            f"$JS.API.DIRECT.GET.KV_{OWNERS}.$KV.{OWNERS}.{service}", *living(service))


def _cmd(kind: str) -> str:
    """A command subject of every table as the server delivers it, in its partition."""
    return partitions.mapped(f"casino.cmd.*.{kind}")


def _durable(name: str) -> tuple[str, ...]:
    """Creating, changing, looking at and acknowledging the durable ``name``."""
    return (f"$JS.API.CONSUMER.CREATE.CASINO.{name}", f"$JS.API.CONSUMER.CREATE.CASINO.{name}.>",
            f"$JS.API.CONSUMER.DURABLE.CREATE.CASINO.{name}", f"$JS.API.CONSUMER.INFO.CASINO.{name}",
            f"$JS.ACK.CASINO.{name}.>")


# The settlement and archiver durables are their services' alone: nobody
# else may create, change, acknowledge or look at them, nor receive their
# deliveries (they go to their services' inboxes).
# A service's own durable: created, delivered, acknowledged.
SETTLES = _durable(SETTLEMENT_DURABLE)[2:]
ARCHIVES = _durable(ARCHIVER_DURABLE)[2:]
# Removing a sealed shoe from the live stream: a purge of its subjects, which
# the stream allows (it denies deleting a message) and no other user may ask for.
REMOVE = (f"$JS.API.STREAM.PURGE.{STREAM}",)
# The administrator creates the casino's streams and buckets, by name and no
# other (a stream of another name could mirror the secret orders), and
# changes none of them once made: no user may update a stream (its sources,
# limits or subjects), delete one, read the secret orders or touch a consumer.
# A change of configuration is a reviewed, recorded migration (docs/security.md).
DECLARED_STREAMS = (STREAM, SECRETS, DLQ, ARCHIVE, *KV_STREAMS)
PROVISION = tuple(f"$JS.API.STREAM.{verb}.{stream}" for stream in DECLARED_STREAMS for verb in ("CREATE", "INFO"))


# The supervisor ``make run``'s simulated floor directs its forfeits as.
SIMULATED_SUPERVISORS = ("SUP-SIM",)


def permissions(tables: Iterable[str], supervisors: Iterable[str] = (), readers: Iterable[str] = ()) -> dict[str, User]:
    """Every user's rights: the services', the readers', the administrator's,
    each table's terminal, each of ``supervisors``, and the devices of each
    table of ``readers`` (its cards read from a card-reading shoe)."""
    kv_write = tuple(f"$KV.{bucket}.>" for bucket in (*BUCKETS.values(), META))
    users: dict[str, User] = {
        "shoe": User(CASINO, (_events("shoe"), "casino.secret.>", *READ, *owning("shoe"),
                              f"$JS.API.DIRECT.GET.{SECRETS}.>", f"$JS.API.STREAM.INFO.{SECRETS}"),
                     (_cmd("shoe"), _cmd("shuffler")),
                     "records shoe events; alone keeps and reads the shuffled orders until each shoe ends", responds=True),
        "wager": User(CASINO, (_events("wager"), *READ, *owning("wager")), (_cmd("wager"), _cmd("book")),
                      "records the wager books; answers the terminals' wagers and the dealer-policy's books", responds=True),
        "dealer-policy": User(CASINO, (_events("coup"), "casino.ev.*.-.-.ruleset", _cmd("shoe"), _cmd("book"),
                                       *READ, *owning("dealer-policy")),
                              (_cmd("coup"), _cmd("supervise.*"), _cmd("read")),
                              "records the coups and each table's rulesets; alone asks the shoe for cards and "
                              "opens and closes wager books", responds=True),
        "settlement": User(CASINO, (_events("settle"), *READ, "casino.dlq.>", *SETTLES, *owning("settlement")), (),
                           "records each coup's payouts, from its own durable consumer (one instance at a time)"),
        "projections": User(CASINO, (*READ, *READ_ARCHIVE, *own_consumers("projections"), *READ_MODELS, *kv_write,
                                     *living("projections")), (),
                            "alone writes the read models and their checkpoint, from a consumer of its own "
                            "(one instance at a time: the holder of the writer's lease); reads the archive to "
                            "fold them again from the whole history (`casino projections rebuild`)"),
        "archiver": User(CASINO, ("casino.archive.>", *READ, *READ_ARCHIVE, *REMOVE, f"$JS.API.CONSUMER.LIST.{STREAM}",
                                  f"$JS.API.STREAM.INFO.{ARCHIVE_KV}", f"$JS.API.DIRECT.GET.{ARCHIVE_KV}.>", *ARCHIVES,
                                  "casino.dlq.archiver", *owning("archiver")),
                         (), "alone seals ended shoes into the archive and removes them from the live stream once "
                             "sealed and read back (one instance at a time); reads the consumers' positions and the read models' checkpoint; "
                             "files a message found under a sealed shoe that its seal does not hold as a dead letter"),
        "floor": User(CASINO, (*READ, *READ_MODELS), ("casino.ev.>",),
                      "the pit's console: the live events as recorded and the read models; writes nothing"),
        "compliance": User(CASINO, (*READ, *READ_MODELS, *READ_ARCHIVE), (),
                           "replay, verification and export: reads the record, live and archived; writes nothing"),
        "web": User(CASINO, (*READ, *READ_MODELS, *READ_ARCHIVE, *LIVENESS, *SESSIONS), (),
                    "the pit's, surveillance's and the regulator's web pages: the record live and archived, "
                    "read in turns, the read models, and which services have a live instance; writes its own "
                    "sessions alone, and creates no consumer"),
        "admin": User(CASINO, (*PROVISION, "casino.cmd.-.*.*"), (),
                      "creates the streams and buckets once; may ping the services (table '-', which "
                      "they refuse); reads nothing"),
    }
    for name in supervisors:
        users[f"supervisor-{name}"] = User(
            f"{SUPERVISOR_ACCOUNT}{name}", (f"casino.cmd.*.supervise.{name}",), (),
            f"supervisor {name}: directs what only a supervisor may (a shoe forfeited, 000 8.20; a change of "
            "procedure, 000 8.2, 001 8.5; a ruling, a reopening) at any table, on "
            "a subject of their own, which names them in the record; nothing else")
    for table in tables:
        users[f"terminal-{table}"] = User(
            f"{TERMINAL_ACCOUNT}{table}", (f"casino.cmd.{table}.coup", f"casino.cmd.{table}.wager"), (),
            f"table {table}'s terminal: its own table's commands and its own replies, nothing else")
    for table in readers:
        for device, subject in DEVICES_EXPORTED.items():
            users[f"{device}-{table}"] = User(
                f"{DEVICE_ACCOUNT}{table}", (subject.replace("*", table),), (),
                f"table {table}'s {'card-reading shoe' if device == 'reader' else 'shuffling machine'}: "
                "reports for its own table on its own subject (docs/readers.md) and reads nothing")
    return users


def markdown_table() -> str:
    """The model as docs/security.md gives it (a test keeps the two equal)."""
    def cell(subjects_: Iterable[str]) -> str:
        return "<br>".join(f"`{s}`" for s in subjects_) or "nothing"

    rows = ["| user | account | may publish (and so ask the JetStream API) | may not | may subscribe to "
            "(besides its own inbox) | answers requests | why |", "|---|---|---|---|---|---|---|"]
    for name, u in permissions(["<table>"], ["<name>"], ["<table>"]).items():
        rows.append(f"| `{name}` | {u.account} | {cell(u.publish)} | {cell(u.deny_publish)} | {cell(u.subscribe)} "
                    f"| {'yes' if u.responds else 'no'} | {u.why} |")
    return "\n".join(rows) + "\n"


def _nats_permissions(user: str, u: User) -> dict[str, object]:
    publish: dict[str, object] = {"allow": list(u.publish)}
    if u.deny_publish:
        publish["deny"] = list(u.deny_publish)
    out: dict[str, object] = {"publish": publish, "subscribe": {"allow": [*u.subscribe, f"{inbox(user)}.>"]}}
    if u.responds:
        out["allow_responses"] = True  # the reply subject of each request received, once
    return out


def accounts(users: dict[str, User], password: dict[str, str]) -> dict[str, object]:
    """The casino's account with its users and exports, each terminal's
    account, importing its own table's two command subjects, and each
    supervisor's, importing its own supervisor's subject, within their limits."""
    def members(account: str) -> list[dict[str, object]]:
        return [{"user": name, "password": password[name], "permissions": _nats_permissions(name, u)}
                for name, u in users.items() if u.account == account]

    others = sorted({u.account for u in users.values() if u.account != CASINO})
    terminals = [a for a in others if a.startswith(TERMINAL_ACCOUNT)]
    supervisors = [a for a in others if a.startswith(SUPERVISOR_ACCOUNT)]
    devices = [a for a in others if a.startswith(DEVICE_ACCOUNT)]
    # The account holds its declared streams and no other (their names are the
    # administrator's only grant besides), and a bounded number of consumers.
    casino: dict[str, object] = {"jetstream": {"max_streams": len(DECLARED_STREAMS)}, "users": members(CASINO),
                                 "mappings": partitions.mappings()}
    exports = [{"service": s, "accounts": terminals} for s in EXPORTED if terminals]
    if supervisors:
        exports.append({"service": SUPERVISED, "accounts": supervisors})
    exports += [{"service": s, "accounts": devices} for s in DEVICES_EXPORTED.values() if devices]
    if exports:
        casino["exports"] = exports
    out: dict[str, object] = {CASINO: casino}
    for account in terminals:
        table = account.removeprefix(TERMINAL_ACCOUNT)
        out[account] = {"users": members(account), "limits": dict(TERMINAL_LIMITS), "imports": [
            {"service": {"account": CASINO, "subject": s.replace("*", table)}} for s in EXPORTED]}
    for account in supervisors:
        name = account.removeprefix(SUPERVISOR_ACCOUNT)
        out[account] = {"users": members(account), "limits": dict(SUPERVISOR_LIMITS), "imports": [
            {"service": {"account": CASINO, "subject": SUPERVISED.removesuffix("*") + name}}]}
    for account in devices:
        table = account.removeprefix(DEVICE_ACCOUNT)
        out[account] = {"users": members(account), "limits": dict(DEVICE_LIMITS), "imports": [
            {"service": {"account": CASINO, "subject": s.replace("*", table)}} for s in DEVICES_EXPORTED.values()]}
    return out


# The casino's own users, whose rights name no table or supervisor: who may
# ask a service what, within the casino's account.
_CASINO_USERS = {name: u for name, u in permissions(()).items() if u.account == CASINO}


def answerable(reply: str, subject: str) -> bool:
    """Whether a request that came on ``subject`` (as delivered, in its
    partition) may be answered on ``reply``: a reply subject the server made
    for a request from another account (a terminal's, a supervisor's), or the
    inbox of a user of the casino's account that may publish the request
    itself. Never anywhere else: not an event, secret or JetStream subject,
    and not another user's inbox, where a consumer delivers (a reply aimed at
    ``_INBOX.settlement.…`` would land among settlement's deliveries)."""
    if reply.startswith("_R_."):
        return True
    if not reply.startswith("_INBOX."):
        return False
    user = _CASINO_USERS.get(reply.split(".", 2)[1])
    return user is not None and any(matches(allowed, subject) for allowed in user.publish)


def passwords(users: Iterable[str]) -> dict[str, str]:
    return {u: secrets.token_urlsafe(18) for u in users}


def server_config(users: dict[str, User], passwords_: dict[str, str]) -> str:
    """nats-server configuration: the accounts and their users, no anonymous access."""
    return "accounts " + json.dumps(accounts(users, passwords_), indent=2) + "\n"


def with_credentials(url: str, user: str, password: str) -> str:
    parts = urlsplit(url)
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{parts.hostname}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


AUTH_FILE = "nats-auth.json"
CONFIG_FILE = "nats.conf"


def local_auth(var: Path, tables: Iterable[str], supervisors: Iterable[str] = SIMULATED_SUPERVISORS,
               readers: Iterable[str] = ()) -> dict[str, str]:
    """The users and passwords of the embedded server under ``var`` (made once,
    kept with owner-only access), and its configuration file written anew."""
    path = var / AUTH_FILE
    users = permissions(tables, supervisors, readers)
    known: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
    pw = {**passwords(u for u in users if u not in known), **known}
    write_private(path, json.dumps(pw))
    write_private(var / CONFIG_FILE, server_config(users, pw))
    return pw


# Each node's memory holds an index entry for every subject the stream keeps
# (docs/operations.md, Sizing the nats-server: how much a coup costs, and how
# this outlasts the values' volume). Requests equal to limits: the node is not evicted first.
NATS_RESOURCES = {"cpu": "2", "memory": "16Gi"}
NATS_GOMEMLIMIT = "14GiB"
# A node restarting reads its store back before it answers its health check,
# in time that grows with the history (after a crash it rebuilds every block's
# index; docs/operations.md, Sizing the nats-server). The chart's default
# startup probe would restart a full node before it is back, again and again:
# an hour's budget, 360 checks 10 s apart.
NATS_STARTUP_CHECKS = 360


def password_variable(user: str) -> str:
    return "CASINO_" + user.upper().replace("-", "_") + "_PASSWORD"


def helm_values(tables: Iterable[str], supervisors: Iterable[str] = (), readers: Iterable[str] = ()) -> dict[str, object]:
    """Values for the official NATS Helm chart: a 3-node JetStream cluster with
    TLS, each write synced to disk before it is acknowledged, the Prometheus
    exporter, and this permission model, each password taken from the
    environment of the NATS pods (``$CASINO_<USER>_PASSWORD``, from a Secret); ``readers``: the
    card-reading tables, whose devices have users of their own."""
    users = permissions(tables, supervisors, readers)
    return {
        "config": {
            "cluster": {"enabled": True, "replicas": 3},
            "jetstream": {"enabled": True, "fileStore": {"enabled": True, "pvc": {"size": "50Gi"}},
                          "merge": {"sync_interval": "always"}},
            "nats": {"tls": {"enabled": True, "secretName": "nats-server-tls"}},
            "merge": {"accounts": accounts(users, {u: f"<< ${password_variable(u)} >>" for u in users})},
        },
        "container": {
            "env": {
                **{password_variable(u): {"valueFrom": {"secretKeyRef": {"name": "nats-users", "key": u}}}
                   for u in users},
                # The Go collector's soft limit, under the container's: it collects harder
                # as the server nears it rather than letting the kernel kill the node.
                "GOMEMLIMIT": NATS_GOMEMLIMIT},
            "merge": {"resources": {"requests": dict(NATS_RESOURCES), "limits": dict(NATS_RESOURCES)},
                      "startupProbe": {"failureThreshold": NATS_STARTUP_CHECKS}}},
        "promExporter": {"enabled": True, "podMonitor": {"enabled": True}},
        "podTemplate": {"topologySpreadConstraints": {"kubernetes.io/hostname": {
            "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}}},
    }
