"""A nats-server on a store listens only once it has read the store back (on a
long history, after a crash, minutes): it is waited for as long as its owner
says, and by default long on a store that holds data, as `make run`'s does."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from casino.cli import main as cli
from casino.cli import store as storeaccess
from casino.nats import client as natsclient
from casino.nats import permissions as natsauth
from casino.nats.provision import provision
from casino.nats.server import READ_BACK_WITHIN, NatsServer

pytestmark = pytest.mark.anyio


def test_a_server_not_listening_within_its_wait_is_reported_and_not_left_running(tmp_path: Path) -> None:
    server = NatsServer(tmp_path / "nats", ready_within=0.0)
    with pytest.raises(TimeoutError):
        server.start()
    assert server.process is not None and server.process.poll() is not None
    with NatsServer(tmp_path / "nats") as again:  # the same store, waited for: it listens
        assert again.process is not None and again.process.poll() is None


async def test_the_command_line_waits_for_make_runs_store_to_be_read_back(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []

    class Recorded(NatsServer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            waits.append(self.ready_within)

    pw = natsauth.local_auth(tmp_path, ["T-1"])  # the store make run leaves, with its users beside it
    with NatsServer(tmp_path / "nats", config=tmp_path / natsauth.CONFIG_FILE) as server:
        nc = await natsclient.connect(natsauth.with_credentials(server.url, "admin", pw["admin"]))
        await provision(nc)
        await nc.close()
    monkeypatch.setattr(storeaccess, "NatsServer", Recorded)
    async with storeaccess.open_store(argparse.Namespace(nats=None, var=str(tmp_path))) as (_, nc):
        assert nc.is_connected
    assert waits == [READ_BACK_WITHIN] and READ_BACK_WITHIN >= 15 * 60


def test_the_command_line_without_a_store_says_so_without_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["verify", "--var", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"casino: no event store under {tmp_path / 'nats'}: run `make run` first, " \
        "or give --nats\n"
