"""The casino observed as an operator observes it: a real Prometheus (Debian's)
scraping every service of a bounded run, as ``casino run --observe`` starts it,
with the alert rules loaded, and a real Alertmanager carrying alerts to a
webhook receiver.

* Every series that the dashboards and the alert rules select is there (but
  those of the NATS exporter and kube-state-metrics, which only a cluster has:
  ``NATS_EXPORTER``), and every dashboard query without a comparison returns
  series.
* A service killed makes ``CasinoServiceDown`` reach the receiver. The rule is
  loaded with its ``for:`` cut from two minutes to five seconds (nothing else
  of it changed): how long it waits is the promtool unit tests' to check.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import re
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import nats
import yaml

from casino.cli.observe import ALERT_RULES, Alertmanager, Prometheus
from casino.cli.run import APPROVALS, SHORT, start_services, start_web, stop_services
from casino.cli.simulator import Simulator
from casino.config.tables import TableConfig, dump_tables
from casino.nats import permissions as natsauth
from casino.nats.server import NatsServer, free_port
from casino.protocol import commands
from casino.protocol.service import Peer
from casino.store import subjects
from tests.natsfixture import provision_now
from tests.ops.test_dashboards_and_alerts import DEPLOY, NATS_EXPORTER, metric_names
from tests.variants import ruleset_variant

COMPARISON = re.compile(r"[<>]=?|==|!=")


class Receiver(http.server.ThreadingHTTPServer):
    """Alertmanager's webhook receiver: every notification's alerts, kept."""

    def __init__(self) -> None:
        self.alerts: list[dict[str, Any]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.alerts += body["alerts"]
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", free_port()), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"


def selectors(expr: str) -> list[str]:
    """The series selectors of ``expr`` (a metric's name with its label matchers), of our services."""
    names = metric_names(expr) - NATS_EXPORTER
    return sorted({m[0] for m in re.finditer(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?", expr) if m[1] in names})


def queries() -> tuple[list[str], list[str]]:
    """Every alert rule's expression, and every dashboard panel's."""
    rules = yaml.safe_load(ALERT_RULES.read_text())
    alerts = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    panels = [t["expr"] for board in sorted((DEPLOY / "grafana").glob("*.json"))
              for p in json.loads(board.read_text())["panels"] for t in p["targets"]]
    return alerts, panels


def rules_with_service_down_after(folder: Path, wait: str) -> Path:
    rules = yaml.safe_load(ALERT_RULES.read_text())
    down = next(r for g in rules["groups"] for r in g["rules"] if r["alert"] == "CasinoServiceDown")
    down["for"] = wait
    path = folder / "alerts.yml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    return path


async def deal(url: str, tables: dict[str, TableConfig], coups: int) -> None:
    """The simulated floor, and one hostile terminal's command refused at each table."""
    nc = await nats.connect(url)
    try:
        await Simulator(nc, tables, seed=2, patience=40).run(coups)
        for table in tables:
            reply = await Peer(nc).ask(subjects.command(table, "coup"), commands.CloseBetting(
                id=f"hostile-{uuid.uuid4().hex}", table=table, coup=f"{table}-999999"))
            assert not reply.ok
    finally:
        await nc.close()


def until(check: Any, within: float, every: float = 1.0) -> Any:
    deadline = time.monotonic() + within
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(every)


def test_prometheus_scrapes_every_series_the_dashboards_and_alerts_use_and_a_service_down_reaches_the_receiver(
        tmp_path: Path) -> None:
    # Shoes of one deck: shoes end, are reshuffled and sealed; the last table's cards read from a card-reading shoe.
    tables = {f"{short}-1": TableConfig(ruleset_variant(tmp_path, ruleset, decks=1, penetration=0.5),
                                        approvals=APPROVALS if ruleset.startswith("baccarat") else (),
                                        cards="read" if i == len(SHORT) - 1 else "shuffled")
              for i, (ruleset, short) in enumerate(SHORT.items())}
    (tmp_path / "logs").mkdir()
    tables_file = tmp_path / "tables.toml"
    tables_file.write_text(dump_tables(tables))
    receiver = Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    server = NatsServer(tmp_path / "nats").start()
    procs: dict[str, Any] = {}
    observers: list[Prometheus | Alertmanager] = []
    try:
        provision_now(server.url)
        procs, targets = start_services(tmp_path, tables_file, lambda name: server.url)
        assert set(targets) == set(natsauth.SERVICES)  # the jobs as the Prometheus operator names them
        web, address = start_web(tmp_path, tables_file, server.url)  # the floor's series too, as `casino run` has it
        procs["web"] = [web]
        targets = {**targets, "web": [address.removeprefix("http://").rstrip("/")]}
        alertmanager = Alertmanager(tmp_path / "alertmanager", receiver.url).start()
        observers.append(alertmanager)
        prometheus = Prometheus(tmp_path / "prometheus", targets, [rules_with_service_down_after(tmp_path, "5s")],
                                alertmanager=alertmanager.address, every="1s")
        observers.append(prometheus.start())
        asyncio.run(deal(server.url, tables, coups=12))

        alerts, panels = queries()
        wanted = sorted({s for expr in alerts + panels for s in selectors(expr)})
        assert "casino_ready" in wanted and any(s.startswith("up{job=~") for s in wanted)

        def missing() -> list[str]:
            return [s for s in wanted if not prometheus.query(s)] + \
                   [e for e in panels if not COMPARISON.search(e) and metric_names(e).isdisjoint(NATS_EXPORTER)
                    and not prometheus.query(e)]

        # the archiver's sweep gives the streams' sizes within 30 s of the start
        assert until(lambda: not missing(), within=90) is True, missing()
        for expr in alerts:
            prometheus.query(expr)  # every rule evaluates (an error names it)
        assert not any(a["labels"]["alertname"] == "CasinoServiceDown" for a in prometheus.alerts())

        procs["settlement"][0].process.send_signal(signal.SIGKILL)
        procs["settlement"][0].process.wait(10)

        def down() -> list[dict[str, Any]]:
            return [a for a in receiver.alerts if a["labels"].get("alertname") == "CasinoServiceDown"]

        notified = until(down, within=60)
        assert notified, (prometheus.alerts(), receiver.alerts)
        assert {a["labels"]["job"] for a in notified} == {"settlement"}
        assert all(a["status"] == "firing" and a["labels"]["severity"] == "page" for a in notified)
        assert notified[0]["annotations"]["summary"].startswith("settlement on 127.0.0.1:")
    finally:
        stop_services(procs, server.url)
        for observer in reversed(observers):
            observer.stop()
        server.stop()
        receiver.shutdown()
