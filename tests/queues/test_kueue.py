"""Kueue quota from the simulator's API: v1beta2, v1beta1 fallback, no Kueue, access, waits, GPU-hours."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.capacity.models import PendingWork
from apps.ingest.collectors.kueue import parse_cluster_queue
from apps.inventory.models import Cluster, Team
from apps.queues.models import ClusterQueueSnapshot, QueueCollection, QuotaSnapshot, Workload
from apps.queues.selectors import percentile
from apps.queues.services import prune_queue_history
from apps.usage.models import PodHour
from tests.harness.kube_world import record_world
from tests.oracle import expected_queues

pytestmark = pytest.mark.django_db

FIELDS = [
    "cluster_queue", "cohort", "flavor", "resource", "nominal_quota", "borrowing_limit", "lending_limit",
    "reserved", "used", "borrowed", "pending_workloads", "admitted_workloads",
]  # fmt: skip


@pytest.fixture
def cluster():
    return Cluster.objects.create(name="sim-demo", source=Cluster.Source.SIMULATOR)


def _client(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def _rows(client) -> list[dict]:
    response = client.get("/api/v1/queues/", {"cluster": "sim-demo"})
    assert response.status_code == 200
    return [{k: r[k] for k in FIELDS} for r in response.json()["results"]]


def _sorted(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["cluster_queue"], r["flavor"], r["resource"]))


def test_it_matches_the_oracle_quota_through_the_api(kube_world, cluster):
    record_world(kube_world, cluster)
    collection = QueueCollection.objects.get()
    assert collection.api_version == "v1beta2"
    rows = _rows(_client(User.objects.create_user("ops", is_staff=True)))
    assert _sorted(rows) == _sorted(expected_queues(kube_world.scenario, kube_world.at))
    research_gpu = next(r for r in rows if r["cluster_queue"] == "research-cq" and r["resource"] == "nvidia.com/gpu")
    assert research_gpu["borrowed"] == 4.0


def test_it_falls_back_to_v1beta1_with_its_field_names(kube_world, cluster, monkeypatch):
    monkeypatch.setattr("devtools.simulator.k8s_api.KUEUE_VERSIONS", ("v1beta1",))
    record_world(kube_world, cluster)
    collection = QueueCollection.objects.get()
    assert collection.api_version == "v1beta1"
    rows = _rows(_client(User.objects.create_user("ops", is_staff=True)))
    assert _sorted(rows) == _sorted(expected_queues(kube_world.scenario, kube_world.at))
    assert parse_cluster_queue({"metadata": {"name": "q"}, "spec": {"cohort": "c"}}, "v1beta1").cohort == "c"


def test_it_records_no_queues_and_no_error_without_kueue(kube_world, cluster, monkeypatch):
    monkeypatch.setattr("devtools.simulator.k8s_api.KUEUE_VERSIONS", ())
    record_world(kube_world, cluster)
    collection = QueueCollection.objects.get()
    assert collection.api_version == ""
    assert not ClusterQueueSnapshot.objects.exists() and not Workload.objects.exists()
    assert _rows(_client(User.objects.create_user("ops", is_staff=True))) == []
    assert not PendingWork.objects.filter(kind="workload").exists()


def test_it_recollects_idempotently(kube_world, cluster):
    record_world(kube_world, cluster)
    state = lambda: (  # noqa: E731
        sorted(QuotaSnapshot.objects.values_list("cluster_queue__name", "flavor", "resource", "reserved", "borrowed")),
        sorted(Workload.objects.values_list("uid", "created", "admitted_at", "cluster_queue", "team")),
        sorted(PendingWork.objects.values_list("kind", "name", "reason")),
    )
    first = state()
    record_world(kube_world, cluster)
    assert state() == first
    assert QueueCollection.objects.count() == 1
    assert ("workload", "quota") in {(k, r) for k, _, r in first[2]}


def test_it_shows_non_staff_only_queues_of_their_teams(kube_world, cluster):
    record_world(kube_world, cluster)
    alice = User.objects.create_user("alice")
    Team.objects.get_or_create(name="research")[0].members.add(alice)
    assert {r["cluster_queue"] for r in _rows(_client(alice))} == {"research-cq"}
    # Someone on no team sees no cluster: naming one is an unknown filter value (400 naming it, worded as for a
    # cluster that does not exist, so visibility is not leaked), and unfiltered they get no queue.
    nobody = _client(User.objects.create_user("nobody"))
    refused = nobody.get("/api/v1/queues/", {"cluster": "sim-demo"})
    assert refused.status_code == 400 and "cluster" in refused.json()["errors"]
    assert nobody.get("/api/v1/queues/").json()["results"] == []


def test_it_computes_admission_wait_percentiles_per_queue_and_day(cluster):
    day = datetime(2026, 11, 23, tzinfo=UTC)
    for i, wait in enumerate([60, 120, 180, 240, 600]):
        created = day + timedelta(hours=1 + i)
        Workload.objects.create(
            cluster=cluster, uid=f"w{i}", namespace="ml", name=f"w{i}", team="research", cluster_queue="research-cq",
            created=created, admitted_at=created + timedelta(seconds=wait), first_seen=created, last_seen=created,
        )  # fmt: skip
    assert percentile([60, 120, 180, 240, 600], 95) == pytest.approx(528.0)
    client = _client(User.objects.create_user("ops", is_staff=True))
    body = client.get("/api/v1/queues/admission-wait/", {"start": "2026-11-23", "end": "2026-11-24"}).json()
    [row] = body["results"]
    assert (row["cluster_queue"], row["day"], row["workloads"]) == ("research-cq", "2026-11-23", 5)
    assert (row["p50_seconds"], row["p95_seconds"]) == (180.0, 528.0)


def test_it_puts_gpu_hours_next_to_quota_and_flags_borrowed_idle(cluster):
    hour = datetime(2026, 11, 23, 5, tzinfo=UTC)
    collection = QueueCollection.objects.create(
        cluster=cluster, taken_at=hour + timedelta(minutes=5), api_version="v1beta2"
    )
    cq = ClusterQueueSnapshot.objects.create(collection=collection, cluster=cluster, taken_at=collection.taken_at,
                                             name="research-cq", cohort="gpu")  # fmt: skip
    QuotaSnapshot.objects.create(
        cluster_queue=cq, cluster=cluster, taken_at=collection.taken_at, flavor="h100",
        resource="nvidia.com/gpu", nominal_quota=16, reserved=20, used=20, borrowed=4,
    )  # fmt: skip
    collection.local_queues.create(cluster=cluster, taken_at=collection.taken_at, namespace="ml", name="research-lq",
                                   cluster_queue="research-cq", team="research")  # fmt: skip
    common = {
        "cluster": cluster, "hour": hour, "team": "research", "node": "n", "node_group": "g",
        "gpu_model": "H100", "resources": "nvidia.com/gpu=8", "gpus": 8, "held_seconds": 3600,
    }  # fmt: skip
    PodHour.objects.create(**common, namespace="ml", pod="a", pod_uid="a", cluster_queue="research-cq",
                           allocated_gpu_hours=8, working_sm_active=2, idle_sm_active=6)  # fmt: skip
    PodHour.objects.create(**common, namespace="ml", pod="b", pod_uid="b", local_queue="research-lq",
                           allocated_gpu_hours=8, working_sm_active=7, idle_sm_active=1)  # fmt: skip
    client = _client(User.objects.create_user("ops", is_staff=True))
    body = client.get("/api/v1/queues/usage/", {"start": "2026-11-23", "end": "2026-11-24"}).json()
    [row] = body["results"]
    assert (row["allocated_gpu_hours"], row["working_gpu_hours"], row["idle_gpu_hours"]) == (16, 9, 7)
    assert (row["nominal_gpus"], row["borrowed_gpus"], row["borrowed_idle_gpu_hours"]) == (16, 4, 4)
    assert row["borrowed_idle"] is True


def test_it_thins_queue_history_older_than_seven_days(cluster):
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    old = now - timedelta(days=8)
    for minutes in (0, 20, 40):
        QueueCollection.objects.create(cluster=cluster, taken_at=old + timedelta(minutes=minutes))
    assert prune_queue_history(now=now) == 2
    assert QueueCollection.objects.get().taken_at == old + timedelta(minutes=40)
