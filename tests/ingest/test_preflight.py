"""The preflight's output (`manage.py check_cluster NAME`) against simulated clusters over the real protocols (the
simulator's Kubernetes API and Prometheus over HTTP, the official client, the production PrometheusSource): the
healthy demo passes every check and exits 0; each degraded cluster names its problem and its exact fix and exits
non-zero; `add_cluster` prints the table without blocking; the staff page shows the last result."""

from __future__ import annotations

import io
import re
from datetime import timedelta

import pytest
from django.core.management import call_command

from apps.inventory.models import Cluster
from devtools.simulator.k8s_api import start_server
from devtools.simulator.prometheus_api import start_prometheus
from devtools.simulator.scenarios import build_scenario
from tests.devtools.conftest import END
from tests.ingest.conftest import sim_world  # noqa: F401 (the session's simulated world, real Prometheus)

pytestmark = pytest.mark.django_db
DAYS = 1


@pytest.fixture
def world(tmp_path, monkeypatch):
    """`world(scenario_name)`: the simulated cluster's two servers and a Cluster row pointing at them."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    started = []

    def make(name: str, **scenario_attributes):  # type: ignore[no-untyped-def]
        plain = {"with_dra": False} if name == "demo" else {}  # the demo's own cases, as its variants are
        scenario = build_scenario(name, seed=0, end=END, days=DAYS, **plain)
        for key, value in scenario_attributes.items():
            setattr(scenario, key, value)
        kube, prom = start_server(scenario), start_prometheus(scenario, step=60)
        started.extend((kube, prom))
        at = END - timedelta(minutes=1)
        kube.set_time(at.timestamp())
        kubeconfig = kube.write_kubeconfig(tmp_path / f"{name}.kubeconfig")
        cluster = Cluster.objects.create(name=scenario.cluster_name, prometheus_url=prom.url,
                                         kubeconfig_path=str(kubeconfig))
        return cluster, at, prom

    yield make
    for server in started:
        server.stop()


def check_cluster(cluster: Cluster, at) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    out = io.StringIO()
    try:
        call_command("check_cluster", cluster.name, "--at", at.isoformat(), stdout=out)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, out.getvalue()


def rows(output: str) -> dict[str, tuple[str, str]]:
    """check name -> (status, the rest of its row and fix line)."""
    out: dict[str, tuple[str, str]] = {}
    name = ""
    for line in output.splitlines()[2:-1]:
        if line.lstrip().startswith("fix: ") and name:
            status, text = out[name]
            out[name] = (status, text + "\n" + line.strip())
            continue
        for status in ("PASS", "WARN", "FAIL"):
            if f"  {status}  " in line:
                name, _sep, rest = line.partition(f"  {status}  ")
                name = name.strip()
                out[name] = (status, rest)
    return out


def test_the_healthy_demo_passes_every_check(world):
    cluster, at, _prom = world("demo")
    code, output = check_cluster(cluster, at)
    table = rows(output)
    assert code == 0, output
    assert output.rstrip().endswith("every check passed"), output
    assert {status for status, _ in table.values()} == {"PASS"}, output
    for name in ("kubernetes reachable", "rbac: list pods", "rbac: list statefulsets (apps)", "gpu nodes",
                 "gfd labels", "kueue", "resource.k8s.io", "prometheus reachable", "retention", "scrape interval",
                 "kube-state-metrics series", "kube-state-metrics label allowlist", "dcgm-exporter on every GPU node",
                 "signal sm_active", "signal gr_engine_active", "pod attribution", "hostname semantics",
                 "mig series"):
        assert name in table, (name, output)
    assert "11 GPU nodes, 64 GPUs" in table["gpu nodes"][1]  # figures, not just a verdict
    assert "kueue.x-k8s.io" in table["kueue"][1]
    assert re.search(r"about (5[5-9]|6[0-7]) s", table["scrape interval"][1])  # 60 s, as counted in a 10m window
    assert "label pod" in table["pod attribution"][1]


def test_stock_counters_fail_the_default_signal_with_the_metrics_list_line(world):
    cluster, at, _prom = world("demo-stock-counters")
    code, output = check_cluster(cluster, at)
    status, text = rows(output)["signal sm_active"]
    assert code == 1 and status == "FAIL", output
    assert "DCGM_FI_PROF_SM_ACTIVE: no series" in text
    assert "DCGM_FI_PROF_SM_ACTIVE, gauge, The ratio of cycles an SM has at least 1 warp assigned (0 to 1)." in text
    assert "customMetrics" in text and "dcgmExporter.config.name" in text and "dcgm-metrics.csv" in text
    assert rows(output)["signal gr_engine_active"][0] == "PASS" and rows(output)["signal tensor_active"][0] == "PASS"


def test_an_exporter_without_node_name_is_named_with_its_fix(world):
    cluster, at, _prom = world("demo-no-node-name")
    code, output = check_cluster(cluster, at)
    status, text = rows(output)["hostname semantics"]
    assert code == 1 and status == "FAIL", output
    assert "nvidia-dcgm-exporter-" in text and "placed on a node only through kube-state-metrics" in text
    assert "NODE_NAME" in text and "spec.nodeName" in text
    assert rows(output)["dcgm-exporter on every GPU node"][0] == "PASS"  # placed through the exporter pods


def test_kube_state_metrics_without_the_team_label_names_the_allowlist_flag(world):
    cluster, at, _prom = world("demo-ksm-no-labels")
    code, output = check_cluster(cluster, at)
    status, text = rows(output)["kube-state-metrics label allowlist"]
    assert code == 1 and status == "FAIL", output
    assert "kube-state-metrics: 0 pods, 0 namespaces" in text
    assert "--metric-labels-allowlist=pods=[team],namespaces=[team]" in text
    assert rows(output)["kube-state-metrics series"][0] == "PASS"


def test_a_missing_rbac_rule_is_named_and_an_unreachable_prometheus_fails(world):
    cluster, at, prom = world("demo", rbac_denied=frozenset({("", "pods"), ("apps", "statefulsets")}))
    code, output = check_cluster(cluster, at)
    table = rows(output)
    assert code == 1
    assert table["rbac: list pods"][0] == "FAIL" and "denied" in table["rbac: list pods"][1]
    assert table["rbac: list statefulsets (apps)"][0] == "WARN"
    assert 'apiGroups: ["apps"] resources: ["statefulsets"]' in table["rbac: list statefulsets (apps)"][1]
    prom.stop()
    code, output = check_cluster(cluster, at)
    assert code == 1 and rows(output)["prometheus reachable"][0] == "FAIL", output


def test_add_cluster_prints_the_preflight_and_the_staff_page_shows_the_last_result(world, client, tmp_path):
    from django.contrib.auth.models import User

    cluster, at, prom = world("demo-stock-counters")
    out = io.StringIO()
    call_command("add_cluster", "added", "--prometheus-url", prom.url, "--kubeconfig", cluster.kubeconfig_path,
                 stdout=out)
    # Run at the wall clock, after the simulated history's end: the table says no DCGM series are there now.
    assert "created cluster added" in out.getvalue() and "preflight of added" in out.getvalue()
    assert "dcgm-exporter on every GPU node" in out.getvalue() and "failed" in out.getvalue()
    assert Cluster.objects.filter(name="added").exists()  # saved though checks failed: told, never blocked
    check_cluster(cluster, at)
    staff = User.objects.create_user("ops", password="x", is_staff=True)
    lead = User.objects.create_user("lead", password="x")
    client.force_login(lead)
    assert client.get(f"/clusters/{cluster.name}/preflight/").status_code in (403, 404)
    client.force_login(staff)
    page = client.get(f"/clusters/{cluster.name}/preflight/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "signal sm_active" in body and "customMetrics" in body and "fail" in body
    assert client.get("/clusters/nope/preflight/").status_code == 404


def test_dra_attribution_is_checked_where_dra_gpus_are_published(world):
    cluster, at, _prom = world("mixed")
    _code, output = check_cluster(cluster, at)
    table = rows(output)
    assert table["dra attribution"][0] == "PASS", output
    assert table["rbac: list resourceclaims (resource.k8s.io)"][0] == "PASS"
    assert "v1" in table["resource.k8s.io"][1]
    cluster, at, _prom = world("mixed-noattr")
    code, output = check_cluster(cluster, at)
    status, text = rows(output)["dra attribution"]
    assert code == 1 and status == "FAIL", output
    assert "0 series naming a claim" in text and "kubernetesDRA.enabled=true" in text


@pytest.mark.services
def test_the_healthy_demo_passes_against_a_real_prometheus(sim_world):  # noqa: F811
    """The same table from a real Prometheus (promtool-backfilled with the demo's history): its status endpoints,
    retention flag and PromQL answers as the preflight reads them."""
    from tests.ingest.conftest import make_cluster

    cluster = make_cluster(sim_world, name="preflight-real")
    sim_world.server.set_time(sim_world.end - timedelta(minutes=2))
    try:
        code, output = check_cluster(cluster, sim_world.end - timedelta(minutes=2))
    finally:
        sim_world.server.set_time(sim_world.end)  # as the session's other tests expect it
    table = rows(output)
    assert code == 0 and {status for status, _ in table.values()} == {"PASS"}, output
    assert "Prometheus 2." in table["prometheus reachable"][1] or "Prometheus 3." in table["prometheus reachable"][1]
    assert table["retention"][1].strip() != "not reported"
