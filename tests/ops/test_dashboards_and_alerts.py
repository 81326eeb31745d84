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
from services.web.metrics import WebMetrics

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
    """Every series name the services and the web export, each family's with its suffixes."""
    families = [*Metrics("probe").registry.collect(), *WebMetrics().registry.collect()]
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


def _dropped(given: object, read: object, path: str = "") -> list[str]:
    """The keys of ``given`` that ``read`` (its round trip) does not hold, at any level."""
    if isinstance(given, dict):
        if not isinstance(read, dict):
            return [path or "."]
        return [p for k, v in given.items()
                for p in ([f"{path}.{k}"] if k not in read else _dropped(v, read[k], f"{path}.{k}"))]
    if isinstance(given, list):
        if not isinstance(read, list) or len(read) != len(given):
            return [path]
        return [p for i, (a, b) in enumerate(zip(given, read, strict=True)) for p in _dropped(a, b, f"{path}[{i}]")]
    return []


def _round_trip(dashboard: dict[str, object]) -> object:
    """The dashboard decoded by grafana-foundation-sdk (Grafana's dashboard
    schema, every panel and data source kind registered) and encoded again."""
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models.dashboard import Dashboard

    register_default_plugins()
    return json.loads(json.dumps(Dashboard.from_json(dashboard), cls=JSONEncoder))


@pytest.mark.parametrize("board", sorted(p.name for p in (DEPLOY / "grafana").glob("*.json")))
def test_each_dashboard_round_trips_through_grafanas_own_schema_with_no_unknown_key(board: str) -> None:
    """A key the schema does not know, at any level (a misspelt option, a field
    of another panel kind), is dropped on the way: named here."""
    given = json.loads((DEPLOY / "grafana" / board).read_text())
    assert _dropped(given, _round_trip(given)) == []


def test_the_round_trip_names_an_unknown_key() -> None:
    given = {"panels": [{"type": "stat", "options": {"reduceOptionz": {}}, "targets": [{"refId": "A", "exprr": "up"}],
                         "datasource": {"type": "prometheus", "uid": "x"}}]}
    assert _dropped(given, _round_trip(given)) == [".panels[0].options.reduceOptionz", ".panels[0].targets[0].exprr"]
