"""GPU-hours waited count each pending unit at the GPU rules' share where it waits: an A30 MIG 1g slice is a
quarter of a GPU (not a seventh), a time-sliced replica 1/R (not one GPU), whatever the pod or Kueue workload."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from apps.capacity.models import PendingWork
from apps.capacity.selectors import pending_gpu_hours
from apps.capacity.services import record_capacity_snapshot
from apps.inventory.models import Cluster
from apps.inventory.observations import (
    ClusterSnapshot,
    Condition,
    ContainerRequest,
    KueueObjects,
    NodeInfo,
    PodInfo,
    PodSetInfo,
    WorkloadInfo,
)

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 23, 10, tzinfo=UTC)
NODES = (
    # 4 x A30 in MIG mixed, every 1g.6gb instance held: a pod asking for two waits for capacity.
    NodeInfo("a30-0", {"nvidia.com/gpu.product": "NVIDIA-A30", "nvidia.com/mig.strategy": "mixed",
                       "karpenter.sh/nodepool": "a30"},
             {"nvidia.com/mig-1g.6gb": "16"}, {"nvidia.com/mig-1g.6gb": "16"}, True, False, T0),
    # 2 x L4 time-sliced 4 ways: nvidia.com/gpu is a replica, a quarter of a GPU.
    NodeInfo("l4-0", {"nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.count": "2",
                      "nvidia.com/gpu.replicas": "4", "karpenter.sh/nodepool": "l4"},
             {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "8"}, True, False, T0),
)  # fmt: skip


def _pod(name: str, team: str, node: str, resource: str, n: int, phase: str = "Running") -> PodInfo:
    return PodInfo(uid=name, namespace="ml", name=name, node=node, phase=phase, labels={"team": team},
                   annotations={}, containers=(ContainerRequest("c", "app", {resource: n}),), created=T0,
                   started=T0 if node else None, finished=None, deletion=None)


PODS = (
    _pod("holder", "ops", "a30-0", "nvidia.com/mig-1g.6gb", 16),
    _pod("wants-slices", "vision", "", "nvidia.com/mig-1g.6gb", 2, phase="Pending"),
    _pod("wants-replica", "nlp", "", "nvidia.com/gpu", 9, phase="Pending"),
)
SWEEP = WorkloadInfo(
    uid="w1", namespace="ml", name="sweep", labels={"team": "research"}, queue_name="lq", cluster_queue="",
    created=T0, pod_sets=(PodSetInfo("main", 3, {"nvidia.com/mig-1g.6gb": 1}),),
    conditions={"QuotaReserved": Condition("False", "Pending", "quota used up", T0)},
)


def test_pending_units_wait_at_the_share_the_ledger_gives_them():
    cluster = Cluster.objects.create(name="shapes")
    kueue = KueueObjects("v1beta2", (), (), (SWEEP,))
    for minutes in (0, 30):  # two collections half an hour apart: each stands for 30 minutes of waiting
        record_capacity_snapshot(cluster, ClusterSnapshot(T0 + timedelta(minutes=minutes), NODES, PODS, (), kueue))
    shares = {(w.name, w.resource): w.share for w in PendingWork.objects.filter(taken_at=T0)}
    assert shares == {("wants-slices", "nvidia.com/mig-1g.6gb"): 0.25, ("wants-replica", "nvidia.com/gpu"): 0.25,
                      ("sweep", "nvidia.com/mig-1g.6gb"): 0.25}
    waited = {w.team: w.gpu_hours for w in pending_gpu_hours(start=T0, end=T0 + timedelta(hours=1),
                                                              visible_teams=None)}
    assert waited == {"vision": 2 * 0.25, "nlp": 9 * 0.25, "research": 3 * 0.25}
