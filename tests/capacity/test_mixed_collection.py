"""Fragmentation of the `mixed` cluster (device plugin, MIG, time-slicing, DRA whole GPUs and MIG devices, HAMi
fractions) read by the collector from the simulator's Kubernetes API over HTTP, equal to the oracle's truth at
several instants; no DRA or HAMi node is ever zero-allocatable."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.ingest.collectors.kubernetes import read_snapshot
from apps.ingest.services import record_side_snapshots
from apps.inventory.models import Cluster
from tests.oracle import expected_fragmentation

pytestmark = [pytest.mark.django_db, pytest.mark.services]

END = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
H = timedelta(hours=1)
FIELDS = [
    "node_group", "gpu_model", "nodes", "physical_gpus", "allocatable_gpus", "allocated_gpus", "free_gpus",
    "largest_free_block", "placeable", "stranded_gpus", "zero_allocatable_nodes",
]  # fmt: skip


@pytest.fixture(scope="module")
def mixed_api():
    from devtools.simulator.k8s_api import start_server
    from devtools.simulator.scenarios import build_scenario

    scenario = build_scenario("mixed", seed=0, end=END, days=2)
    server = start_server(scenario, host="127.0.0.1", port=0)
    yield scenario, server
    server.stop()


def _api_client(server):  # type: ignore[no-untyped-def]
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = server.url
    cfg.api_key = {"authorization": "sim-token"}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    return client.ApiClient(configuration=cfg)


def _rounded(rows: list[dict]) -> list[dict]:
    return [{k: round(v, 6) if isinstance(v, float) else v for k, v in r.items()} for r in rows]


@pytest.mark.parametrize("hours_before_end", [20, 17, 10, 3, 1])
def test_the_mixed_cluster_fragments_as_the_oracle_says(mixed_api, hours_before_end: int) -> None:
    scenario, server = mixed_api
    at = END - hours_before_end * H - timedelta(minutes=30)
    server.set_time(at)
    cluster = Cluster.objects.create(name="sim-mixed", source=Cluster.Source.SIMULATOR)
    snap = dataclasses.replace(read_snapshot(cluster, api_client=_api_client(server)), taken_at=at)
    assert snap.dra is not None and snap.dra.version == "v1"
    record_side_snapshots(cluster, snap)
    client = APIClient()
    client.force_authenticate(User.objects.create_user("ops", is_staff=True))
    response = client.get("/api/v1/fragmentation/", {"cluster": "sim-mixed", "at": at.isoformat()})
    assert response.status_code == 200
    got = [{k: row[k] for k in FIELDS} for row in response.json()["results"]]
    expected = expected_fragmentation(scenario, at)
    assert _rounded(got) == _rounded(expected)
    dra_or_hami = {n.name for n in scenario.nodes if n.kind in ("dra", "hami")}
    named = {n for row in response.json()["results"] for n in row["zero_allocatable_node_names"]}
    assert not named & dra_or_hami
