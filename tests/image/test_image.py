"""Every service run from the image (``make image``) as the k8s manifests run it:
its Deployment's command and arguments, a read-only root file system, user
10001, every capability dropped and no new privileges, ``/tmp`` a tmpfs, the
tables file mounted read-only at ``/etc/casino``, its NATS URL (its own user)
in the environment (the web's accounts mounted as its Secret is). The one
change: each serves on a port of its own, the containers sharing the host's
network (the project's engine has no bridge). The NATS server is a container
too, that testcontainers starts with the casino's users and permissions. A
bounded run dealt at them verifies, and the web from the image serves that
run's coup page, verified, and the regulation's text of a clause it cites.

``make image-test`` runs this (CASINO_TEST_NATS=container, $CASINO_IMAGE,
$DOCKER_HOST the project's engine); ``make test`` does not: the image takes
minutes to make on a fresh machine."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from services.web.accounts import write_accounts

from casino.cli.run import SHORT, default_tables
from casino.cli.simulator import SUPERVISOR, Simulator
from casino.config.tables import dump_tables
from casino.nats import client as natsclient
from casino.nats import permissions as natsauth
from casino.nats.server import free_port
from tests.natsfixture import chosen, nats_container, provision_now
from tests.ops.test_kubernetes import render

COUPS = 5


def required() -> str:
    if chosen() != "container" or not os.environ.get("CASINO_IMAGE"):
        pytest.fail("the image tests run with `make image-test` (CASINO_TEST_NATS=container and $CASINO_IMAGE set)")
    return os.environ["CASINO_IMAGE"]


def as_deployed(image: str, deployment: dict[str, Any], volumes: dict[str, Path], url: str, port: int) -> Any:
    """The Deployment's container as the engine runs it (testcontainers), each
    of its read-only volumes (the tables' ConfigMap; the web's accounts
    Secret) the host directory ``volumes`` names for it."""
    from testcontainers.core.container import DockerContainer

    spec = deployment["spec"]["template"]["spec"]["containers"][0]
    security = spec["securityContext"]
    args = list(spec["args"])
    args[args.index("--http-port") + 1] = str(port)
    assert security["readOnlyRootFilesystem"] and security["capabilities"]["drop"] == ["ALL"]
    assert not security["allowPrivilegeEscalation"]
    mounts = {m["mountPath"]: m for m in spec["volumeMounts"]}
    assert mounts["/etc/casino"]["readOnly"] and mounts["/tmp"]["name"] == "tmp"
    container = (DockerContainer(image)
                 .with_command(args)
                 .with_kwargs(entrypoint=spec["command"], network_mode="host", read_only=True,
                              user=str(security["runAsUser"]), cap_drop=["ALL"], security_opt=["no-new-privileges"])
                 .with_tmpfs_mount("/tmp")
                 .with_env("CASINO_NATS_URL", url))
    for path, mount in mounts.items():
        if path != "/tmp":
            assert mount["readOnly"], (deployment["metadata"]["name"], path)
            container = container.with_volume_mapping(str(volumes[mount["name"]]), path, "ro")
    return container


def ready(port: int) -> bool:
    with contextlib.suppress(urllib.error.URLError, OSError), \
            urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
        return r.status == 200
    return False


def status(container: Any) -> str:
    """The container's state as the engine has it now."""
    wrapped = container.get_wrapped_container()
    wrapped.reload()
    return str(wrapped.status)


@contextlib.contextmanager
def services(image: str, volumes: dict[str, Path], url_of: Any) -> Iterator[dict[str, tuple[Any, int]]]:
    deployments = {d["metadata"]["name"]: d for d in render("dev") if d["kind"] == "Deployment"}
    assert set(deployments) == {*natsauth.SERVICES, "web"}
    running: dict[str, tuple[Any, int]] = {}
    try:
        for name, deployment in deployments.items():
            port = free_port()
            container = as_deployed(image, deployment, volumes, url_of(name), port).start()
            running[name] = (container, port)
        deadline = time.monotonic() + 90
        while not all(ready(port) for _, port in running.values()):
            exited = [n for n, (c, _) in running.items() if status(c) == "exited"]
            assert not exited and time.monotonic() < deadline, {
                n: c.get_logs()[1].decode()[-2000:] for n, (c, _) in running.items() if n in exited or not exited}
            time.sleep(0.5)
        yield running
    finally:
        for container, _ in running.values():
            container.stop()


async def deal(url_of: Any, tables: dict[str, Any]) -> None:
    """The floor watching, each table commanding through its own terminal's user,
    and the floor supervisor directing through theirs."""
    nc = await natsclient.connect(url_of("floor"))
    terminals = {t: await natsclient.connect(url_of(f"terminal-{t}")) for t in tables}
    supervisor = await natsclient.connect(url_of(f"supervisor-{SUPERVISOR}"))
    try:
        await Simulator(nc, tables, seed=11, patience=40, terminals=terminals, supervisor=supervisor).run(COUPS)
    finally:
        for client in (*terminals.values(), supervisor):
            await client.close()
        await nc.close()


def pages(port: int, table: str, password: str) -> tuple[str, str]:
    """The web's page of the table's first coup, signed in as compliance; and
    the page of the first clause it links to (the regulations' text the image
    carries)."""
    base = f"http://127.0.0.1:{port}"
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    with browser.open(f"{base}/signin", timeout=30) as r:  # the form, and its token's cookie
        token = re.search(r'name="csrf" value="([^"]+)"', r.read().decode())
    assert token, "the sign-in form carries no token"
    form = urllib.parse.urlencode({"csrf": token[1], "user": "compliance", "password": password,
                                   "then": f"/coup/{table}/1"})
    with browser.open(f"{base}/signin", data=form.encode(), timeout=30) as r:
        assert r.geturl().endswith(f"/coup/{table}/1"), r.geturl()
        coup = r.read().decode()
    link = re.search(r'href="(/clause/[^"]+)"', coup)
    assert link, coup[-3000:]
    with browser.open(base + link.group(1), timeout=30) as r:
        return coup, r.read().decode()


def test_every_service_from_the_image_deals_a_bounded_run_that_verifies(tmp_path: Path) -> None:
    image = required()
    tables = default_tables(4, list(SHORT))
    config = tmp_path / "config"
    config.mkdir()
    (config / "tables.toml").write_text(dump_tables(tables))
    config.chmod(0o755)
    (config / "tables.toml").chmod(0o644)  # the ConfigMap's mode: readable by the service's user
    accounts = tmp_path / "accounts"
    accounts.mkdir()
    passwords = write_accounts(accounts / "accounts.json", {"compliance": "compliance"})
    (accounts / "accounts.json").chmod(0o644)  # the Secret's default mode
    pw = natsauth.local_auth(tmp_path, tables)
    with nats_container(tmp_path / "nats", (tmp_path / natsauth.CONFIG_FILE).read_text()) as url:
        def url_of(user: str) -> str:
            return natsauth.with_credentials(url, user, pw[user])

        provision_now(url_of("admin"))
        with services(image, {"config": config, "accounts": accounts}, url_of) as running:
            for name, (container, _) in running.items():
                attrs = container.get_wrapped_container().attrs
                assert attrs["HostConfig"]["ReadonlyRootfs"] and attrs["Config"]["User"] == "10001", name
            asyncio.run(deal(url_of, tables))
            verified = subprocess.run([sys.executable, "-m", "casino.cli.main", "verify", "--var", str(tmp_path),
                                       "--nats", url_of("compliance")], capture_output=True, text=True, timeout=300)
            coup, clause = pages(running["web"][1], next(iter(tables)), passwords["compliance"])
            logs = {n: c.get_logs() for n, (c, _) in running.items()}
        assert "Verified" in coup, coup[-3000:]
        assert "<pre class=\"regulation\">" in clause, clause[-3000:]
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert f"verified {COUPS * len(tables)} coups" in verified.stdout, verified.stdout
        for name, (out, err) in logs.items():
            assert b"Traceback" not in out + err, (name, (out + err).decode()[-3000:])
        print(json.dumps({"image": image, "services": sorted(logs), "coups": COUPS * len(tables)}))
