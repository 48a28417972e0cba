"""/api/v1/idle-allocations/: pods holding GPUs with activity below the threshold for consecutive hours."""

from __future__ import annotations

import pytest
from django.test import override_settings


def test_it_lists_pods_idle_for_the_minimum_consecutive_hours_up_to_the_latest_bucket(clients):
    body = clients["root"].get("/api/v1/idle-allocations/").json()
    assert body["count"] == 3
    rows = {r["pod"]: r for r in body["results"]}
    assert [r["pod"] for r in body["results"]] == ["idle-llm", "idle-train", "idle-misc"]  # most idle first
    assert rows["idle-train"] == {
        "cluster": "alpha",
        "team": "vision",
        "namespace": "vision-ns",
        "pod": "idle-train",
        "node": "alpha-node-1",
        "node_group": "h100",
        "gpu_model": "NVIDIA-H100-80GB-HBM3",
        "gpus": 4.0,
        "idle_since": "2026-11-24T00:00:00Z",
        "last_bucket": "2026-11-24T02:00:00Z",
        "idle_hours": 3,
        "activity": 0.0,
        "allocated_gpu_hours": 12.0,
        "idle_gpu_hours": 12.0,
        "cost": "24.000000",
        "idle_cost": "24.000000",
    }
    assert rows["idle-llm"]["activity"] == pytest.approx(0.0025)
    assert rows["idle-llm"]["idle_gpu_hours"] == pytest.approx(23.94)
    assert (rows["idle-misc"]["idle_since"], rows["idle-misc"]["idle_hours"]) == ("2026-11-24T01:00:00Z", 2)


@override_settings(GPUFINOPS_IDLE_MIN_HOURS=3)
def test_it_honours_the_minimum_hours_setting(clients):
    pods = [r["pod"] for r in clients["root"].get("/api/v1/idle-allocations/").json()["results"]]
    assert pods == ["idle-llm", "idle-train"]


@override_settings(GPUFINOPS_IDLE_THRESHOLD=0.001)
def test_it_honours_the_threshold_setting(clients):
    pods = [r["pod"] for r in clients["root"].get("/api/v1/idle-allocations/").json()["results"]]
    assert pods == ["idle-train", "idle-misc"]


def test_it_filters_idle_allocations_by_cluster_and_team(clients):
    def pods(query):
        return [r["pod"] for r in clients["root"].get(f"/api/v1/idle-allocations/?{query}").json()["results"]]

    assert pods("cluster=beta") == ["idle-llm"]
    assert pods("team=unassigned") == ["idle-misc"]
    assert pods("cluster=alpha&team=nlp") == []


def test_it_paginates_with_a_page_size(clients):
    body = clients["root"].get("/api/v1/idle-allocations/?page_size=2").json()
    assert body["count"] == 3 and len(body["results"]) == 2 and body["next"]
    body = clients["root"].get("/api/v1/idle-allocations/?page_size=2&page=2").json()
    assert [r["pod"] for r in body["results"]] == ["idle-misc"] and body["next"] is None
