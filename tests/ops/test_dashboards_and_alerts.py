"""The alert rules pass their promtool unit tests; every metric the dashboards
and alerts use is one the services export (or, for the event store's volume
and the nats-server's memory, the NATS exporter and kube-state-metrics)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from casino.metrics import Metrics

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PROMQL_WORDS = {"sum", "by", "rate", "increase", "deriv", "histogram_quantile", "time", "and", "on", "le", "or",
                "without", "max", "min", "avg", "count", "irate", "changes", "predict_linear", "group_left"}
# The NATS exporter's (the nats Helm chart's promExporter, -varz): how full each node's JetStream store
# is, and its resident memory; kube-state-metrics': the memory limit of the nats container.
NATS_EXPORTER = {"nats_varz_jetstream_stats_storage", "nats_varz_jetstream_config_max_storage", "nats_varz_mem",
                 "kube_pod_container_resource_limits"}


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is missing: `make test` installs it (Debian's prometheus package); "
                    "install it by hand with `apt-get install prometheus`")
    return found


SERIES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created")}


def exported() -> set[str]:
    """Every series name the services export, each family's with its suffixes."""
    families = Metrics("probe").registry.collect()
    return {f"{f.name}{suffix}" for f in families for suffix in ("", *SERIES.get(f.type, ()))} | {"up"} | NATS_EXPORTER


def metric_names(expr: str) -> set[str]:
    expr = re.sub(r"\{[^}]*\}", "", re.sub(r'"[^"]*"', "", expr))
    expr = re.sub(r"\b(by|on|without|ignoring)\s*\([^)]*\)", "", expr)
    words = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr))
    return {w for w in words if (w not in PROMQL_WORDS and "_" in w) or w == "up"} - {"table", "service"}


def test_the_alert_rules_pass_their_unit_tests() -> None:
    for args in (["check", "rules", "alerts.yml"], ["test", "rules", "alerts.test.yml"]):
        out = subprocess.run([promtool(), *args], cwd=DEPLOY / "prometheus", capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr


def test_every_alert_has_a_unit_test() -> None:
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    tests = yaml.safe_load((DEPLOY / "prometheus" / "alerts.test.yml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    tested = {a["alertname"] for t in tests["tests"] for a in t["alert_rule_test"] if a["exp_alerts"]}
    assert alerts == tested


def test_dashboards_and_alerts_use_only_metrics_the_services_export() -> None:
    known = exported()
    exprs = [r["expr"] for g in yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())["groups"]
             for r in g["rules"]]
    for board in (DEPLOY / "grafana").glob("*.json"):
        dashboard = json.loads(board.read_text())
        assert dashboard["uid"] and dashboard["panels"]
        exprs += [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    for expr in exprs:
        unknown = metric_names(expr) - known
        assert not unknown, (expr, unknown)
