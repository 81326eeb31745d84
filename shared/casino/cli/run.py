"""``casino run``: the whole casino on this machine. An embedded nats-server with
JetStream on loopback (data under ``var/``), the four services as separate
processes, and the simulator dealing at the tables, with a live console."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
from nats.aio.client import Client

from casino.cli.console import LEGEND, Console, where_tables_stand
from casino.cli.observe import ALERT_RULES, Prometheus
from casino.cli.simulator import REFUSED_IN_A_ROW, SUPERVISOR, Simulator
from casino.cli.store import URL_FILE
from casino.config import rulesets
from casino.config.tables import TableConfig, dump_tables
from casino.nats import client as natsclient
from casino.nats import permissions as natsauth
from casino.nats.provision import provision
from casino.nats.server import NatsServer, StoreInUse, free_port
from casino.processes import Child, Supervised, dies_with_parent
from casino.readmodels.projections import KvProjections, Takings
from casino.rules.baccarat.messages import Approval
from casino.store import subjects
from casino.store.jetstream import STREAM, JetStreamEventStore

SERVICES = ("shoe", "wager", "dealer_policy", "settlement", "projections", "archiver")
TABLES_FILE = ("shoe", "dealer_policy")  # the services given the tables file: where each table's cards come from
# Stopped stage by stage, each stage's services together: the web and the archiver first (it seals only what
# is over); the dealer-policy next, which asks the wager service and the shoe (a round's end, for a coup just
# dealt) as it finishes; then those two; then settlement, once every result is written; the projections last,
# once they have read every event, so the read models stop at the end of the stream.
STOP_ORDER = (("web", "archiver"), ("dealer_policy",), ("wager", "shoe"), ("settlement",), ("projections",))
WEB_PASSWORDS = "web-passwords.json"  # the web pages' users (pit, surveillance, compliance) and passwords
SHORT = {"baccarat-000-methods": "BAC000", "baccarat-001-styles": "BAC001",
         "blackjack-002-hole-card": "BJ002", "blackjack-003-no-hole-card": "BJ003"}
APPROVALS = (Approval("method_b", "inspector", "INS-SIM", "at the simulated floor's baccarat tables, 2,500 the least "
                      "wager on either hand", "2026-01-15"),
             Approval("holder_plays_player", "casino_supervisor", "SUP-SIM", granted="2026-01-15"))


def default_tables(count: int, names: list[str], readers: int = 0) -> dict[str, TableConfig]:
    """``count`` tables dealing the rulesets in turn: BAC000-1, BAC001-1, BJ002-1, ...;
    the last ``readers`` of them card-reading tables (docs/readers.md), shuffled
    by a recognised machine and by hand in turn."""
    tables = {}
    for i, ruleset in zip(range(count), itertools.cycle(names), strict=False):
        name = f"{SHORT.get(ruleset, 'T')}-{i // len(names) + 1}"
        read = i >= count - readers
        tables[name] = TableConfig(ruleset, approvals=APPROVALS if ruleset.startswith("baccarat") else (),
                                   currency=SIMULATED_CURRENCY, supervisors=natsauth.SIMULATED_SUPERVISORS,
                                   cards="read" if read else "shuffled",
                                   shuffle="hand" if read and (count - 1 - i) % 2 else "recognised")
    return tables


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--coups", type=at_least(1), default=None,
                   help="deal N coups per table, then exit 0 (default: forever)")
    p.add_argument("--pace", type=seconds, default=None, metavar="SECONDS",
                   help=f"open a coup at each table every SECONDS, 0 flat out (default {PACE:g}, a pace a person "
                        "can follow; with --coups, flat out)")
    p.add_argument("--tables", type=at_least(1), default=4, help="number of tables (default 4, one per ruleset)")
    p.add_argument("--rulesets", default=",".join(SHORT), help="comma-separated rulesets the tables deal, in turn")
    p.add_argument("--readers", type=at_least(0), default=1,
                   help="how many of the tables (the last) read their cards from a card-reading shoe, shuffled by a "
                        "recognised machine and by hand in turn (default 1; docs/readers.md)")
    p.add_argument("--faults", type=chance, default=None, metavar="CHANCE",
                   help=f"the chance at each card that a card-reading table's devices misbehave: a misdraw, a "
                        f"substituted card, a report sent twice, a silent shoe (default {FAULTS:g}; with --coups, 0)")
    p.add_argument("--seed", type=int, default=None, help="seed for the simulated players (not the shuffle)")
    p.add_argument("--casino", type=named, default=SIMULATED,
                   help=f"the casino's name, recorded with its store when the store is made (default {SIMULATED!r})")
    p.add_argument("--port", type=at_least(0), default=4222, help="NATS port; a free one if taken (default 4222)")
    p.add_argument("--var", default="var", help="data directory (default ./var)")
    p.add_argument("--replicas", type=at_least(1), default=1,
                   help="instances of every service, each a process of its own (default 1)")
    p.add_argument("--observe", action="store_true",
                   help="also run a Prometheus scraping every service, with the alert rules loaded (make tools installs it)")


def at_least(least: int) -> Callable[[str], int]:
    """A whole number of at least ``least``, as an argument."""
    def checked(value: str) -> int:
        if not value.isdigit() or int(value) < least:
            raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of {least} or more")
        return int(value)

    return checked


SIMULATED = "Simulated casino"
SIMULATED_CURRENCY = "EUR"
FAULTS = 0.02  # the simulated devices' chance of a fault at each card when nobody says
PACE = 4.0  # seconds between a table's coups when nobody says: a person watching can follow each one


def named(value: str) -> str:
    """A casino's name as an argument: printable, one line, 1 to 100 characters."""
    if not 0 < len(value) <= 100 or not value.isprintable():
        raise argparse.ArgumentTypeError(f"{value!r} is no casino's name: 1 to 100 printable characters")
    return value


def chance(value: str) -> float:
    """A chance, 0 to 1, as an argument."""
    try:
        if 0 <= (taken := float(value)) <= 1:
            return taken
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"{value!r} is not a chance from 0 to 1")


def seconds(value: str) -> float:
    """A time in seconds, 0 or more, as an argument."""
    try:
        if (taken := float(value)) >= 0:
            return taken
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds, 0 or more")


async def _provision(url: str, casino: str) -> None:
    """The streams and buckets, created by the administrator (the services
    may not), the store named for ``casino``; a store whose streams differ
    from their declarations, or another casino's, is refused."""
    nc = await natsclient.connect(url)
    try:
        await provision(nc, casino=casino)
    finally:
        await nc.close()


async def _wait_ready(url: str, timeout: float = 30.0) -> None:
    nc = await natsclient.connect(url)
    try:
        for service in ("shoe", "wager", "coup"):
            deadline = time.monotonic() + timeout
            while True:
                try:
                    await nc.request(subjects.command("-", service), b"{}", timeout=1)
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"the {service} service did not start") from None
                    await asyncio.sleep(0.2)
    finally:
        await nc.close()


async def _simulate(url: str, terminal_urls: dict[str, str], supervisor_url: str, tables: dict[str, TableConfig],
                    coups: int | None, seed: int | None, pace: float = 0.0,
                    device_urls: dict[str, tuple[str, str]] | None = None, faults: float = 0.0,
                    physical: Path | None = None) -> None:
    """The floor's console on ``url``; each simulated table commands through
    its own terminal's user, as a table on a casino floor does (and each
    card-reading table's devices through theirs, their physical shoes kept
    under ``physical``)."""
    console = Console(list(tables), {t: c.currency for t, c in tables.items()})
    nc = await natsclient.connect(url, **_quietly())
    terminals = {table: await natsclient.connect(u, **_quietly()) for table, u in terminal_urls.items()}
    supervisor = await natsclient.connect(supervisor_url, **_quietly())  # the floor supervisor's own credential
    devices = {table: (await natsclient.connect(reader, **_quietly()), await natsclient.connect(shuffler, **_quietly()))
               for table, (reader, shuffler) in (device_urls or {}).items()}
    # A second run continues the same store: show where each table stands.
    await projections_caught_up(nc)
    kv = await KvProjections(nc.jetstream()).open()
    takings = {key: msgspec.json.decode(value, type=Takings)
               for (_, key), value in (await kv.values(("takings", t) for t in tables)).items() if value}
    await where_tables_stand(console, JetStreamEventStore(nc), takings)

    async def redraw() -> None:
        last = 0.0
        while True:
            await asyncio.sleep(0.5)
            if console.live:
                console.draw()
            elif time.monotonic() - last > 10:
                print(console.render(), flush=True)
                last = time.monotonic()

    painter = asyncio.create_task(redraw())
    try:
        await Simulator(nc, tables, seed, console, terminals=terminals, supervisor=supervisor, every=pace,
                        devices=devices, faults=faults, physical=physical,
                        give_up_after=REFUSED_IN_A_ROW).run(coups)
        await projections_caught_up(nc)
    finally:
        painter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await painter
        if console.live:
            console.draw()  # the tables as they end, in place
        else:
            print(console.render(), flush=True)
        for connection in (*terminals.values(), *(c for pair in devices.values() for c in pair), supervisor, nc):
            with contextlib.suppress(Exception):  # a connection its server dropped closes as it can
                await connection.close()


def _quietly() -> dict[str, Any]:
    """A connection that waits out its server's absence in silence (every
    request is asked again: the simulated terminals are patient; the
    launcher says when the server exited and is started again), never with
    a trace."""
    return {"error_cb": natsclient.unheard, "max_reconnect_attempts": -1}


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # Ctrl-C, and a polite kill
# Seconds a stop takes at most: the services in order (each gives up waiting on a broker that is away),
# then the server. Every process ends within 10 s, whatever the broker is doing.
SERVICES_STOP_WITHIN = 7.0
SERVER_STOP_WITHIN = 2.0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _run(main: Coroutine[Any, Any, None]) -> None:
    """``asyncio.run(main)``, a stop signal cancelling it where it waits (not
    raising in whatever it runs, which can leave a task's error unretrieved):
    KeyboardInterrupt once it has wound down."""
    async def until_stopped() -> bool:
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        assert task is not None
        stopped = False

        def stop() -> None:
            nonlocal stopped
            stopped = True
            task.cancel()
            # Asked again until it ends: Python 3.11's wait_for loses a cancellation that comes as
            # the request it waits on is answered (a simulated terminal's, say), and dealing went on.
            loop.call_later(0.5, lambda: None if task.done() else stop())

        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, stop)
        try:
            await main
        except asyncio.CancelledError:
            if not stopped:
                raise
        finally:
            for sig in STOP_SIGNALS:
                loop.remove_signal_handler(sig)
                signal.signal(sig, _interrupt)
        return stopped

    if asyncio.run(until_stopped()):
        raise KeyboardInterrupt


async def projections_caught_up(nc: Client, timeout: float = 10) -> bool:
    """Let the read models reach the end of the stream (as it is now) before
    stopping, ``timeout`` seconds at most: whether they did."""
    kv = await KvProjections(nc.jetstream()).open()
    last = (await nc.jetstream().stream_info(STREAM)).state.last_seq
    deadline = time.monotonic() + timeout
    while await kv.seq() < last:
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.1)
    return True


def _read_models_caught_up(url: str, within: float) -> None:
    """Until the projections have read every event (``within`` seconds at
    most); a store not answering, or a second Ctrl-C, stops waiting."""
    async def caught_up() -> None:
        nc = await natsclient.connect(url, **{**_quietly(), "connect_timeout": 1, "max_reconnect_attempts": 0,
                                              "allow_reconnect": False})
        try:
            await projections_caught_up(nc, within)
        finally:
            await nc.close()

    with contextlib.suppress(Exception, KeyboardInterrupt):
        _run(asyncio.wait_for(caught_up(), within))  # its connection too: a server away is not waited for


Processes = dict[str, list[Child]]


def start_services(var: Path, tables_file: Path, url_of: Callable[[str], str], replicas: int = 1) -> tuple[Processes, dict[str, list[str]]]:
    """Every service, ``replicas`` processes of each, connecting as its own
    user (``url_of`` its name gives its URL, passed in the environment, never
    on the command line), each serving its metrics and health on a free
    loopback port: the processes (each started again as it was, on the same
    port), and where each service's are served (its name -> ``host:port``
    of each instance)."""
    procs: Processes = {}
    targets: dict[str, list[str]] = {}
    for service in SERVICES:
        name = service.replace("_", "-")
        cmd = [sys.executable, "-m", f"services.{service}", "--http-host", "127.0.0.1"]
        if service in TABLES_FILE:
            cmd += ["--tables", str(tables_file)]
        env = {**os.environ, "CASINO_NATS_URL": url_of(name)}
        for n in range(1, max(1, replicas) + 1):
            port = free_port()
            instance, log_name = (name, f"{service}.log") if n == 1 else (f"{name}-{n}", f"{service}-{n}.log")
            procs.setdefault(service, []).append(Child(instance, partial(
                _child, [*cmd, "--http-port", str(port)], var / "logs" / log_name, env)))
            targets.setdefault(name, []).append(f"127.0.0.1:{port}")
    return procs, targets


def _child(cmd: list[str], log_file: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """One of the launcher's processes: its output to ``log_file``, in a
    session of its own (Ctrl-C reaches the launcher, which stops them in
    order), ended when the launcher dies."""
    with log_file.open("ab") as log:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env,
                                preexec_fn=dies_with_parent())


def start_web(var: Path, tables_file: Path, url: str) -> tuple[Child, str]:
    """The web pages (services.web) on a free loopback port, as the web user;
    their accounts made once under ``var``: the process, and its address."""
    port = free_port()
    return Child("web", partial(_child, [
        sys.executable, "-m", "services.web", "--tables", str(tables_file), "--accounts", str(var / "web-auth.json"),
        "--passwords", str(var / WEB_PASSWORDS), "--http-port", str(port)], var / "logs" / "web.log",
        {**os.environ, "CASINO_NATS_URL": url})), f"http://127.0.0.1:{port}/"


def _listening(addresses: list[str], within: float = 30.0) -> None:
    """Until every ``host:port`` takes a connection (a service serves its
    metrics and health once it has started)."""
    deadline = time.monotonic() + within
    for address in addresses:
        host, _, port = address.rpartition(":")
        while True:
            try:
                socket.create_connection((host, int(port)), 0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"nothing listens on {address} after {within:g} s: see the logs") from None
                time.sleep(0.1)


def stop_services(procs: Processes, url: str, within: float = SERVICES_STOP_WITHIN) -> None:
    """The services stopped stage by stage (``STOP_ORDER``), the read models
    once they have caught up (read through ``url``), all of it within
    ``within`` seconds: one still running then is killed. A stage's services
    stop together, so that a slow machine spends the time once a stage,
    not once a service."""
    deadline = time.monotonic() + within
    for stage in STOP_ORDER:
        running = [(service, c.process) for service in stage if service in procs for c in procs[service]]
        if "projections" in stage and any(p.poll() is None for _, p in running):
            _read_models_caught_up(url, max(0.1, min(3.0, deadline - time.monotonic() - 1.0)))
        for _, p in running:
            p.terminate()
        for service, p in running:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                print(f"the {service} service did not stop within {within:.0f} s: killed", file=sys.stderr,
                      flush=True)


def run(args: argparse.Namespace) -> int:
    # Ctrl-C (SIGINT) and a polite kill (SIGTERM) both stop everything in order.
    for sig in STOP_SIGNALS:
        signal.signal(sig, _interrupt)
    names = [r.strip() for r in args.rulesets.split(",") if r.strip()]
    for name in names:  # a ruleset that cannot be read is refused before anything starts
        rulesets.load(name)
    var = Path(args.var)
    (var / "logs").mkdir(parents=True, exist_ok=True)
    tables = default_tables(args.tables, names, min(args.readers, args.tables))
    readers = [t for t, c in tables.items() if c.cards == "read"]
    server = NatsServer(var / "nats", port=args.port, config=var / natsauth.CONFIG_FILE,
                        log_file=var / "logs" / "nats-server.log")
    try:  # before anything under var is written: a store another launcher runs is left as it is
        server.lock_store()
    except StoreInUse as exc:
        print(f"casino run: {exc}", file=sys.stderr, flush=True)
        return 2
    tables_file = var / "tables.toml"
    tables_file.write_text(dump_tables(tables), encoding="utf-8")
    pw = natsauth.local_auth(var, tables, readers=readers)  # every service and device its own user; none anonymous
    if server.holds_store():
        print(f"nats-server reads the store in {var / 'nats'} back before it listens: a long history takes "
              f"a while, after a crash minutes (docs/operations.md: Sizing the nats-server)", flush=True)
    # The server is started again until the services have stopped; they, until they are stopped.
    servers, children = Supervised([Child("nats-server", lambda: _started(server))]), Supervised()
    servers.start()
    children.start()

    def url(user: str) -> str:
        return natsauth.with_credentials(server.url, user, pw[user])

    url_file = var / URL_FILE  # where `casino replay` and `casino verify` find the running store
    url_file.write_text(server.url, encoding="utf-8")
    print(f"nats-server with JetStream on {server.url}, data in {var / 'nats'}; logs in {var / 'logs'}", flush=True)
    procs: Processes = {}
    prometheus: Prometheus | None = None
    try:
        _run(_provision(url("admin"), args.casino))
        procs, targets = start_services(var, tables_file, url, args.replicas)
        for child in (c for instances in procs.values() for c in instances):
            children.add(child)
        for name, where in targets.items():
            print(f"{name:<14} " + "  ".join(f"http://{w}/metrics" for w in where) + "  (and /healthz, /readyz)",
                  flush=True)
        web, address = start_web(var, tables_file, url("web"))
        procs["web"] = [children.add(web)]
        print(f"{'web':<14} {address}  (sign in as pit, surveillance or compliance: passwords in "
              f"{var / WEB_PASSWORDS})", flush=True)
        if args.observe:
            prometheus = Prometheus(var / "prometheus", {**targets, "web": [address.removeprefix("http://").rstrip("/")]})
            prometheus.start()
            print(f"Prometheus on {prometheus.url}, scraping every service with the alert rules of "
                  f"{ALERT_RULES.relative_to(ALERT_RULES.parents[2])} loaded; data in {prometheus.folder}", flush=True)
        _run(_wait_ready(url("admin")))
        _listening([w for where in targets.values() for w in where] + [address.removeprefix("http://").rstrip("/")])
        pace = args.pace if args.pace is not None else 0.0 if args.coups else PACE
        print(f"dealing at {', '.join(tables)}" + (f", {args.coups} coups each" if args.coups else "; Ctrl-C stops")
              + (f", a coup every {pace:g} s a table" if pace else ", flat out"), flush=True)
        print(LEGEND, flush=True)
        _run(_simulate(url("floor"), {t: url(f"terminal-{t}") for t in tables}, url(f"supervisor-{SUPERVISOR}"),
                       tables, args.coups, args.seed, pace,
                       {t: (url(f"reader-{t}"), url(f"shuffler-{t}")) for t in readers},
                       args.faults if args.faults is not None else 0.0 if args.coups else FAULTS, var / "devices"))
        print("every coup dealt and settled", flush=True)
        return 0
    except KeyboardInterrupt:
        print("\nstopping", flush=True)
        return 0
    finally:
        children.stop_restarting()
        stop_services(procs, url("floor"))
        if prometheus is not None:
            prometheus.stop()
        servers.stop_restarting()
        server.stop(SERVER_STOP_WITHIN)
        url_file.unlink(missing_ok=True)


def add_web_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--var", default="var",
                   help="the data directory a `casino run` made (default ./var): its store served by a nats-server "
                        "of its own, nothing dealt")
    p.add_argument("--nats", default=None,
                   help="a running casino's NATS URL, with the web user's name and password, instead of --var's store")
    p.add_argument("--tables", default=None, help="the tables file (default: the one under --var)")
    p.add_argument("--port", type=at_least(0), default=4222, help="NATS port for --var's store; a free one if taken")


def web(args: argparse.Namespace) -> int:
    """The web pages alone, over a store a bounded run left (``--var``) or a
    running casino's (``--nats``): read-only, as the web user, whose rights
    read the record and the read models and write nothing of them. No
    service runs: the floor says so, and shows the record as it stands."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _interrupt)
    var = Path(args.var)
    tables_file = Path(args.tables) if args.tables else var / "tables.toml"
    if not tables_file.exists():
        raise FileNotFoundError(f"no tables file {tables_file}: `casino run --var {var}` makes one with its store "
                                f"(or give --tables)")
    (var / "logs").mkdir(parents=True, exist_ok=True)  # a store copied from a casino may come without
    server: NatsServer | None = None
    servers = Supervised()
    if args.nats:
        url = args.nats
    else:
        auth = var / natsauth.AUTH_FILE
        if not (var / "nats").is_dir() or not auth.exists():
            raise FileNotFoundError(f"no store under {var}: `casino run --var {var}` makes one (or give --nats)")
        server = NatsServer(var / "nats", port=args.port, config=var / natsauth.CONFIG_FILE,
                            log_file=var / "logs" / "nats-server.log")
        try:
            server.lock_store()
        except StoreInUse as exc:
            print(f"casino web: {exc}", file=sys.stderr, flush=True)
            return 2
        held = server
        servers.add(Child("nats-server", lambda: _started(held)))
        url = natsauth.with_credentials(server.url, "web", msgspec.json.decode(auth.read_bytes())["web"])
    servers.start()
    children = Supervised()
    children.start()
    procs: Processes = {}
    try:
        page, address = start_web(var, tables_file, url)
        procs["web"] = [children.add(page)]
        _listening([address.removeprefix("http://").rstrip("/")])
        over = "the casino at --nats" if args.nats else var / "nats"
        print(f"web {address}  (read-only over {over}; sign in as pit, surveillance or compliance: passwords in "
              f"{var / WEB_PASSWORDS}); Ctrl-C stops", flush=True)
        while True:
            time.sleep(1.0)
    except KeyboardInterrupt:
        print("\nstopping", flush=True)
        return 0
    finally:
        children.stop_restarting()
        stop_services(procs, url)
        servers.stop_restarting()
        if server is not None:
            server.stop(SERVER_STOP_WITHIN)


def _started(server: NatsServer) -> subprocess.Popen[bytes]:
    server.start()
    assert server.process is not None
    return server.process



