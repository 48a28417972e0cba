"""Capacity snapshots from the simulator's Kubernetes API, compared with the simulator's oracle."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.capacity.models import CapacityCollection, NodeGroupSnapshot, PendingReasonCount, PendingWork
from apps.capacity.services import prune_capacity_history
from apps.inventory.models import Cluster, Team
from tests.harness.kube_world import record_world
from tests.oracle import expected_fragmentation, expected_pending

pytestmark = pytest.mark.django_db

FIELDS = [
    "node_group", "gpu_model", "nodes", "physical_gpus", "allocatable_gpus", "allocated_gpus", "free_gpus",
    "largest_free_block", "placeable", "stranded_gpus", "zero_allocatable_nodes",
]  # fmt: skip


def _collect(world, cluster):
    return record_world(world, cluster)


def _table_state() -> list:
    rows = []
    for model in (CapacityCollection, NodeGroupSnapshot, PendingWork, PendingReasonCount):
        fields = [f.attname for f in model._meta.concrete_fields if f.attname not in ("id", "collection_id")]
        rows.append(sorted(map(repr, model.objects.values_list(*fields))))
    return rows


@pytest.fixture
def cluster():
    return Cluster.objects.create(name="sim-demo", source=Cluster.Source.SIMULATOR)


@pytest.fixture
def staff_client():
    user = User.objects.create_user("ops", is_staff=True)
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_it_matches_the_oracle_fragmentation_through_the_api(kube_world, cluster, staff_client):
    _collect(kube_world, cluster)
    response = staff_client.get("/api/v1/fragmentation/", {"cluster": "sim-demo"})
    assert response.status_code == 200
    got = [{k: row[k] for k in FIELDS} for row in response.json()["results"]]
    assert got == expected_fragmentation(kube_world.scenario, kube_world.at)
    names = {row["node_group"]: row["zero_allocatable_node_names"] for row in response.json()["results"]}
    assert names["NVIDIA-L4"] == ["l4-noplugin-0"]
    units = {u["unit"] for row in response.json()["results"] for u in row["units"]}
    assert {"gpu", "replica", "mig-1g.10gb", "mig-3g.40gb", "mig-7g.80gb"} <= units


def test_it_diagnoses_pending_work_like_the_oracle(kube_world, cluster, staff_client):
    _collect(kube_world, cluster)
    response = staff_client.get("/api/v1/pending/", {"cluster": "sim-demo", "page_size": 1000})
    got = {(r["kind"], r["namespace"], r["name"]): r["reason"] for r in response.json()["results"]}
    expected = {
        (e["kind"], e["namespace"], e["name"]): e["reason"]
        for e in expected_pending(kube_world.scenario, kube_world.at)
    }
    assert got == expected
    assert set(got.values()) >= {"quota", "capacity", "other"}
    counts = staff_client.get(
        "/api/v1/pending/counts/", {"cluster": "sim-demo", "start": kube_world.at.isoformat(),
                                   "end": (kube_world.at + timedelta(days=1)).isoformat()}
    ).json()["results"]  # fmt: skip
    assert sum(c["items"] for c in counts) == len(expected)


def test_it_recollects_idempotently_and_history_survives_a_restart(kube_world, cluster):
    record_world(kube_world, cluster)
    first = _table_state()
    # A restart: nothing in memory, the same collection recorded again from the same cluster state.
    record_world(kube_world, cluster)
    assert _table_state() == first


def test_it_thins_history_older_than_seven_days_to_hourly(cluster):
    from datetime import UTC, datetime

    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    old = now - timedelta(days=9)
    for minutes in (0, 5, 10, 55, 65):
        CapacityCollection.objects.create(cluster=cluster, taken_at=old + timedelta(minutes=minutes))
    recent = [now - timedelta(minutes=m) for m in (5, 10)]
    for t in recent:
        CapacityCollection.objects.create(cluster=cluster, taken_at=t)
    assert prune_capacity_history(now=now) == 3
    kept = sorted(CapacityCollection.objects.values_list("taken_at", flat=True))
    assert kept == [old + timedelta(minutes=55), old + timedelta(minutes=65), *sorted(recent)]
    assert prune_capacity_history(now=now) == 0


def test_it_shows_non_staff_only_their_teams_pending_work(kube_world, cluster):
    _collect(kube_world, cluster)
    alice = User.objects.create_user("alice")
    Team.objects.get_or_create(name="research")[0].members.add(alice)
    client = APIClient()
    client.force_authenticate(alice)
    rows = client.get("/api/v1/pending/").json()["results"]
    assert rows and {r["team"] for r in rows} == {"research"}
    nobody = User.objects.create_user("nobody")
    client.force_authenticate(nobody)
    assert client.get("/api/v1/pending/").json()["results"] == []
    assert client.get("/api/v1/fragmentation/").json()["results"] == []


def test_it_answers_bad_input_with_400_naming_the_parameter(staff_client):
    assert "at" in staff_client.get("/api/v1/fragmentation/", {"at": "yesterday"}).json()["errors"]
    assert "reason" in staff_client.get("/api/v1/pending/", {"reason": "bored"}).json()["errors"]
    assert APIClient().get("/api/v1/fragmentation/").status_code == 401
