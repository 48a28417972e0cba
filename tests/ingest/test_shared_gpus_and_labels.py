"""Shared GPUs and tenant-written labels through the production collector, a real Prometheus and PostgreSQL.

A hand-made cluster: one time-sliced L4 node (4 GPUs x 4 replicas) and pods observed through the Kubernetes
snapshot path; DCGM series as dcgm-exporter writes them, backfilled into a real Prometheus.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from apps.ingest.collectors.prometheus import PrometheusSource
from apps.inventory.models import Cluster, NamespaceTeam, Team
from apps.inventory.observations import ClusterSnapshot, ContainerRequest, NamespaceInfo, NodeInfo, PodInfo
from apps.inventory.services import nodes_sync
from apps.usage import services as ledger
from apps.usage.models import Bucket, PodHour
from tests.harness.prometheus import start_prometheus

pytestmark = pytest.mark.services

HOUR = datetime(2026, 11, 23, 10, tzinfo=UTC)
NODE = NodeInfo(
    "l4-ts", {"nvidia.com/gpu.product": "NVIDIA-L4-SHARED", "nvidia.com/gpu.count": "4",
              "nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"},
    {"nvidia.com/gpu": "16"}, {"nvidia.com/gpu": "16"}, True, False, HOUR - timedelta(days=3),
)  # fmt: skip


def _pod(name: str, replicas: int, *, namespace: str = "ml", labels: dict | None = None) -> PodInfo:
    return PodInfo(
        uid=f"uid-{name}", namespace=namespace, name=name, node="l4-ts", phase="Running", labels=labels or {},
        annotations={}, containers=(ContainerRequest("main", "app", {"nvidia.com/gpu": float(replicas)}),),
        created=HOUR - timedelta(hours=2), started=HOUR - timedelta(hours=2), finished=None, deletion=None,
    )  # fmt: skip


def _openmetrics(path: Path, series: list[dict[str, str]], value: float) -> Path:
    """SM activity samples every 60 s over the hour for each labelled series."""
    lines = ["# TYPE DCGM_FI_PROF_SM_ACTIVE gauge"]
    start = int((HOUR - timedelta(minutes=5)).timestamp())
    for labels in series:
        text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        lines += [f"DCGM_FI_PROF_SM_ACTIVE{{{text}}} {value} {t}" for t in range(start, start + 3900, 60)]
    path.write_text("\n".join([*lines, "# EOF", ""]))
    return path


def _collect(cluster: Cluster, pods: list[PodInfo], prometheus_url: str) -> Bucket:
    taken = HOUR + timedelta(hours=2)
    nodes_sync(cluster, [NODE], taken)
    snapshot = ClusterSnapshot(taken, (NODE,), tuple(pods), (NamespaceInfo("ml", {}), NamespaceInfo("shop", {})))
    ledger.record_pod_observations(cluster, snapshot)
    cluster.prometheus_url = prometheus_url
    cluster.save()
    outcome = ledger.collect_bucket(cluster, HOUR, now=taken, source=PrometheusSource(cluster),
                                    namespace_labels=snapshot.namespace_labels, owner="test")
    assert outcome.state == "written", outcome.error
    return Bucket.objects.get(cluster=cluster, hour=HOUR)


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["one series per GPU and pod", "one series per replica (vgpu)"])
def test_every_replica_a_pod_holds_on_one_shared_gpu_is_measured(tmp_path, mode):
    labels = {"UUID": "GPU-l4-0", "gpu": "0", "Hostname": "l4-ts", "namespace": "ml", "pod": "two",
              "container": "main", "DCGM_FI_DRIVER_VERSION": "550.54.15"}  # fmt: skip
    series = [labels] if mode.startswith("one series per GPU") else [{**labels, "vgpu": r} for r in ("0", "1")]
    prom = start_prometheus(_openmetrics(tmp_path / "dcgm.om", series, 0.6))
    try:
        cluster = Cluster.objects.create(name="shared")
        _collect(cluster, [_pod("two", 2)], prom.url)
    finally:
        prom.close()
    row = PodHour.objects.get(cluster=cluster, pod="two")
    assert row.allocated_gpu_hours == pytest.approx(0.5)  # 2 replicas x 1/4 GPU x 1 h
    assert row.unmeasured_sm_active == pytest.approx(0.0)
    assert row.working_sm_active == pytest.approx(0.5 * 0.6)


@pytest.mark.django_db
def test_tenant_team_labels_never_fail_a_bucket_and_never_move_cost(tmp_path, postgres_db):
    """A 150-character team label (PostgreSQL's column holds 100) and a formula go to `unassigned` with a
    warning; in an enforced namespace a label naming another team is reported, not obeyed."""
    Team.objects.create(name="shop")
    NamespaceTeam.objects.create(namespace="shop", team=Team.objects.get(name="shop"), enforced=True)
    pods = [
        _pod("long", 1, labels={"team": "x" * 150}),
        _pod("formula", 1, labels={"team": "=HYPERLINK(\"http://evil\")"}),
        _pod("thief", 1, namespace="shop", labels={"team": "research"}),
        _pod("fine", 1, labels={"team": "research"}),
    ]
    prom = start_prometheus(_openmetrics(tmp_path / "dcgm.om", [], 0.0))
    try:
        cluster = Cluster.objects.create(name="tenants")
        bucket = _collect(cluster, pods, prom.url)
    finally:
        prom.close()
    teams = dict(PodHour.objects.filter(cluster=cluster).values_list("pod", "team"))
    assert teams == {"long": "unassigned", "formula": "unassigned", "thief": "shop", "fine": "research"}
    assert bucket.status in ("ok", "source_missing")
    warnings = "\n".join(bucket.warnings)
    assert "not obeyed (invalid)" in warnings and "'research' not obeyed (enforced)" in warnings
