"""A steady-state observation (issue 24): nodes and pods seen again unchanged only move their last_seen, in one
UPDATE each; new and changed ones are upserted whole."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.inventory.models import Cluster, Node
from apps.inventory.observations import ClusterSnapshot, ContainerRequest, NamespaceInfo, NodeInfo, PodInfo
from apps.inventory.services import nodes_sync
from apps.usage import services as ledger
from apps.usage.models import PodObservation

pytestmark = pytest.mark.django_db

T = datetime(2026, 11, 23, 10, tzinfo=UTC)
NODES = tuple(
    NodeInfo(f"gpu-{i}", {"nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.count": "4"},
             {"nvidia.com/gpu": "4"}, {"nvidia.com/gpu": "4"}, True, False, T - timedelta(days=3))
    for i in range(2)
)  # fmt: skip


def _pod(name: str, node: str, labels: dict | None = None) -> PodInfo:
    return PodInfo(
        uid=f"uid-{name}", namespace="ml", name=name, node=node, phase="Running", labels=labels or {}, annotations={},
        containers=(ContainerRequest("main", "app", {"nvidia.com/gpu": 1.0}),), created=T - timedelta(hours=1),
        started=T - timedelta(hours=1), finished=None, deletion=None,
    )  # fmt: skip


def _observe(cluster: Cluster, at: datetime, nodes: tuple[NodeInfo, ...], pods: tuple[PodInfo, ...]) -> list[str]:
    """The SQL of one observation."""
    with CaptureQueriesContext(connection) as queries:
        nodes_sync(cluster, nodes, at)
        ledger.record_pod_observations(cluster, ClusterSnapshot(at, nodes, pods, (NamespaceInfo("ml", {}),)))
    return [q["sql"] for q in queries.captured_queries]


def _writes(sql: list[str], table: str) -> tuple[int, int]:
    """(INSERT statements, UPDATE statements) of `table`."""
    return (sum(s.startswith(f'INSERT INTO "{table}"') for s in sql),
            sum(s.startswith(f'UPDATE "{table}"') for s in sql))


def test_unchanged_rows_only_move_their_last_seen_and_changed_ones_are_rewritten():
    cluster = Cluster.objects.create(name="steady")
    pods = (_pod("a", "gpu-0"), _pod("b", "gpu-1"))
    _observe(cluster, T, NODES, pods)
    node_table, pod_table = Node._meta.db_table, PodObservation._meta.db_table

    # Seen again as they were: no upsert, one UPDATE of last_seen per table.
    sql = _observe(cluster, T + timedelta(minutes=5), NODES, pods)
    assert _writes(sql, node_table) == (0, 2)  # last_seen of the unchanged, `gone` of the vanished (none)
    assert _writes(sql, pod_table) == (0, 1)
    assert set(Node.objects.filter(cluster=cluster).values_list("last_seen", flat=True)) == {T + timedelta(minutes=5)}
    assert set(PodObservation.objects.filter(cluster=cluster).values_list("last_seen", flat=True)) == {
        T + timedelta(minutes=5)}

    # A relabelled pod, a new pod and a cordoned node are upserted; the rest only move their last_seen.
    later = T + timedelta(minutes=10)
    nodes = (replace(NODES[0], unschedulable=True), NODES[1])
    pods = (pods[0], _pod("b", "gpu-1", {"team": "search"}), _pod("c", "gpu-0"))
    sql = _observe(cluster, later, nodes, pods)
    # (Django's bulk_create inserts rows with and without a primary key in separate statements: b, then c.)
    assert _writes(sql, node_table) == (1, 2) and _writes(sql, pod_table) == (2, 1)
    got = {o.pod: o for o in PodObservation.objects.filter(cluster=cluster)}
    assert got["b"].labels == {"team": "search"} and got["c"].first_seen == later
    assert {o.last_seen for o in got.values()} == {later}
    assert Node.objects.get(cluster=cluster, name="gpu-0").unschedulable
    assert set(Node.objects.filter(cluster=cluster).values_list("last_seen", flat=True)) == {later}
