"""The production collector names every pod's workload like the oracle, through the simulated Kubernetes API
(ReplicaSets, Jobs and StatefulSets listed) for the pods it sees and kube-state-metrics' owner series for those it
missed, and its ledger per workload and hour equals `expected_usage_by_workload` over the hours of the demo's
health events."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

import pytest

from apps.ingest.services import collect_cluster
from apps.inventory.models import Cluster
from apps.usage.models import PodHour
from devtools.simulator.k8s_api import start_server
from devtools.simulator.prometheus_api import start_prometheus
from devtools.simulator.scenarios import build_scenario
from tests.devtools.conftest import END
from tests.oracle import expected_usage_by_workload

pytestmark = pytest.mark.django_db

DAYS = 2
FIRST, LAST = 31, 45  # hours from the start: the PyTorchJob, the JobSet, the notebook, the vanished GPU...


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    scenario = build_scenario("demo", seed=0, end=END, days=DAYS, with_dra=False)
    kube = start_server(scenario)
    prometheus = start_prometheus(scenario, step=60)
    kubeconfig = kube.write_kubeconfig(tmp_path_factory.mktemp("kube") / "kubeconfig")
    yield scenario, kube, prometheus, kubeconfig
    prometheus.stop()
    kube.stop()


def test_the_ledger_per_workload_equals_the_oracle(world, monkeypatch):
    scenario, kube, prometheus, kubeconfig = world
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    hours = [scenario.start + timedelta(hours=h) for h in range(FIRST, LAST)]
    now = hours[-1] + timedelta(hours=1)
    kube.set_time(now)  # the pods that ended before are known from kube-state-metrics only
    cluster = Cluster.objects.create(name="sim-workloads", prometheus_url=prometheus.url,
                                     kubeconfig_path=str(kubeconfig))
    report = collect_cluster(cluster, hours, now=now)
    assert report.ok and len(report.written) == len(hours), report.failed
    got: dict = defaultdict(lambda: defaultdict(float))
    for r in PodHour.objects.filter(cluster=cluster):
        row = got[(r.team, r.namespace, r.workload, r.hour)]
        row["allocated"] += r.allocated_gpu_hours
        row["working"] += r.working_sm_active
        row["unmeasured"] += r.unmeasured_sm_active
    expected = {k: v for k, v in expected_usage_by_workload(scenario, hours[0], now).items() if v["allocated"] > 0}
    assert set(got) == set(expected)
    for key, e in expected.items():
        assert got[key]["allocated"] == pytest.approx(e["allocated"], abs=1e-6), key
        assert got[key]["unmeasured"] == pytest.approx(e["unmeasured"], abs=1e-6), key
        assert got[key]["working"] == pytest.approx(e["working"], rel=0.01, abs=1e-3), key
    workloads = {k[2].split("/")[0] for k in expected}
    assert workloads == {"Deployment", "Job", "CronJob", "JobSet", "PyTorchJob", "StatefulSet", "LeaderWorkerSet",
                         "Pod"}
    # gone before the snapshot: named from kube_pod_owner and kube_job_owner history
    gone = {p.name for p in scenario.pods if p.name.startswith(("embed-shards-", "jupyter-hana-"))}
    assert gone and all(not p.visible(now.timestamp()) for p in scenario.pods if p.name in gone)
    assert {r.workload for r in PodHour.objects.filter(cluster=cluster, pod__in=gone)} == {
        "JobSet/embed-shards", "StatefulSet/jupyter-hana"}
