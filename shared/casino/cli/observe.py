"""A Prometheus of the casino's own on this machine (``casino run --observe``),
and an Alertmanager beside it (the tests): Debian's ``prometheus`` and
``prometheus-alertmanager`` binaries (``make tools`` installs them), each on a
free loopback port with its data under the run's folder, scraping every
service with the alert rules of ``deploy/prometheus`` loaded.

Each service is scraped as the job the Prometheus operator names it on a
cluster: the ServiceMonitors' ``jobLabel`` is ``app.kubernetes.io/name``, the
service's name (``casino.nats.permissions.SERVICES``), so that the alerts and
dashboards match the same labels here and there."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from casino.nats.server import free_port, stop_process

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
ALERT_RULES = DEPLOY / "prometheus" / "alerts.yml"
SCRAPE_EVERY = "5s"


def binary(name: str, package: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} not found: `make tools` installs it (Debian's {package} package)")
    return found


def prometheus_config(targets: dict[str, list[str]], rules: list[Path], alertmanager: str | None = None,
                      every: str = SCRAPE_EVERY) -> dict[str, Any]:
    """Every service's instances (``host:port``) as the job of its name."""
    config: dict[str, Any] = {
        "global": {"scrape_interval": every, "evaluation_interval": every},
        "rule_files": [str(r) for r in rules],
        "scrape_configs": [{"job_name": job, "static_configs": [{"targets": where}]}
                           for job, where in targets.items()],
    }
    if alertmanager is not None:
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
    return config


class _Process:
    """A server process on a free loopback port: each kind's ``start`` writes
    its configuration and launches its command; ``stop`` stops it."""

    name = ""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def _launch(self, command: list[str], within: float = 30.0) -> _Process:
        """Run ``command`` until the server answers ``/-/ready``."""
        with (self.folder / f"{self.name}.log").open("ab") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + within
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: see {self.folder}/{self.name}.log")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"{self.name} not ready within {within:.0f} s: see {self.folder}/{self.name}.log")
            time.sleep(0.2)

    def stop(self) -> None:
        stop_process(self.proc)


class Prometheus(_Process):
    """Scraping ``targets`` (job -> instances) with ``rules`` loaded, sending
    alerts to ``alertmanager`` (``host:port``) when one is given."""

    name = "prometheus"

    def __init__(self, folder: Path, targets: dict[str, list[str]], rules: list[Path] | None = None,
                 alertmanager: str | None = None, every: str = SCRAPE_EVERY) -> None:
        super().__init__(folder)
        self.config = prometheus_config(targets, [ALERT_RULES] if rules is None else rules, alertmanager, every)

    def start(self) -> _Process:
        self.folder.mkdir(parents=True, exist_ok=True)
        config = self.folder / "prometheus.yml"
        config.write_text(json.dumps(self.config, indent=2), encoding="utf-8")  # YAML reads JSON
        return self._launch([binary("prometheus", "prometheus"), f"--config.file={config}",
                             f"--storage.tsdb.path={self.folder / 'data'}", f"--web.listen-address={self.address}"])

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector (or scalar, as one sample) ``expr`` gives now; an error names the expression."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.loads(r.read())
        except urllib.error.HTTPError as exc:
            raise ValueError(f"{expr}: {exc.read().decode(errors='replace')}") from None
        data = body["data"]
        return data["result"] if data["resultType"] in ("vector", "matrix") else [{"value": data["result"]}]

    def alerts(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.url}/api/v1/alerts", timeout=10) as r:
            return list(json.loads(r.read())["data"]["alerts"])


class Alertmanager(_Process):
    """Routing every alert to the webhook at ``receiver`` (a URL) at once."""

    name = "alertmanager"

    def __init__(self, folder: Path, receiver: str) -> None:
        super().__init__(folder)
        self.receiver = receiver

    def start(self) -> _Process:
        self.folder.mkdir(parents=True, exist_ok=True)
        config = self.folder / "alertmanager.yml"
        config.write_text(json.dumps({
            "route": {"receiver": "webhook", "group_by": ["alertname"], "group_wait": "1s", "group_interval": "1s",
                      "repeat_interval": "1h"},
            "receivers": [{"name": "webhook", "webhook_configs": [{"url": self.receiver, "send_resolved": False}]}],
        }, indent=2), encoding="utf-8")
        return self._launch([binary("prometheus-alertmanager", "prometheus-alertmanager"), f"--config.file={config}",
                             f"--storage.path={self.folder / 'data'}", f"--web.listen-address={self.address}",
                             "--cluster.listen-address="])  # one on its own: no gossip port
