"""Ground-truth oracle sanity and known numbers."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

import pytest

from devtools.simulator.exposition import dcgm_samples
from devtools.simulator.objects import k8s_objects
from devtools.simulator.scenarios import build_scenario
from tests.devtools.conftest import END
from tests.oracle import expected_fragmentation, expected_ledger, expected_pending, expected_queues


@pytest.fixture(scope="module")
def ledger(demo):
    return expected_ledger(demo, demo.start, demo.end)


def test_it_keeps_the_ledger_identities(ledger, demo):
    assert len(ledger.pod_hours) > 1000
    for r in ledger.pod_hours:
        assert r["allocated"] == pytest.approx(r["working"] + r["idle"] + r["unmeasured"], abs=1e-9)
        assert r["working"] >= -1e-12 and r["idle"] >= -1e-9 and r["unmeasured"] >= 0
    for (_hour, _node), v in ledger.node_hours.items():
        assert v["allocated"] <= v["capacity"] + 1e-9
        assert v["allocated"] + v["unallocated"] == pytest.approx(v["capacity"])
        assert v["unavailable"] <= v["capacity"] + 1e-9
    team_total = sum(v["allocated"] for v in ledger.team_hours.values())
    assert team_total == pytest.approx(ledger.totals()["allocated"])
    capacity = sum(v["capacity"] for v in ledger.node_hours.values())
    assert capacity == pytest.approx(64 * 24 * 7)
    assert 0.5 <= ledger.totals()["allocated"] / capacity <= 0.8


def test_it_knows_teams_idle_notebooks_and_unmeasured_units(ledger, demo):
    teams = {team for (_h, team) in ledger.team_hours}
    assert {"research", "serving", "data", "vision", "unassigned"} <= teams
    rows = defaultdict(list)
    for r in ledger.pod_hours:
        rows[r["pod"]].append(r)
    assert {r["team"] for r in rows["jupyter-carol-0"]} == {"vision"}  # pod label overrides namespace
    fs = rows["feature-store-0"]
    assert all(r["unmeasured"] == r["allocated"] == 1.0 for r in fs)  # lost labels
    prep = next(p for p in rows if p.startswith("data-prep-"))
    assert sum(r["allocated"] for r in rows[prep]) == pytest.approx(6.0)  # max(1 app, 2 init) x 3 h
    assert sum(r["unmeasured"] for r in rows[prep]) == pytest.approx(3.0)
    alice = [r for r in rows["jupyter-alice-0"] if r["hour"] >= demo.start + timedelta(days=1, hours=1)]
    assert len(alice) > 100 and all(r["working"] < 0.01 * r["allocated"] for r in alice)
    late = [r for r in ledger.pod_hours if r["pod"] == "scratch-dave"]
    assert sum(r["allocated"] for r in late) == pytest.approx(14.0)  # 2 GPUs x 7 h until deletion
    mig = [r for r in ledger.pod_hours if r["pod"] == "jupyter-bob-0"]
    assert all(r["allocated"] == pytest.approx(1 / 7) for r in mig)
    ts = [r for r in ledger.pod_hours if r["pod"] == "jupyter-gina-0"]
    assert all(r["allocated"] == pytest.approx(0.25) for r in ts)


def test_it_counts_mig_units_unmeasured_under_gpu_util(demo):
    end = demo.end
    led = expected_ledger(demo, end - timedelta(hours=1), end, signal="gpu_util")
    bob = next(r for r in led.pod_hours if r["pod"] == "jupyter-bob-0")
    assert bob["unmeasured"] == pytest.approx(bob["allocated"])
    train = sorted((r for r in led.pod_hours if r["pod"].startswith("llm-pretrain")), key=lambda r: r["pod"])
    assert len(train) == 2 and train[0]["working"] > 0.8 * train[0]["allocated"]
    assert train[1]["working"] < train[0]["working"]  # rank 1 is throttled


def test_it_reports_cordoned_and_zero_allocatable_nodes_as_unavailable(ledger, demo):
    last = demo.end - timedelta(hours=1)
    assert ledger.node_hours[(last, "a100-0")]["unavailable"] == 8
    assert ledger.node_hours[(last, "l4-noplugin-0")]["unavailable"] == 2
    assert ledger.node_hours[(demo.start, "a100-0")]["unavailable"] == 0


def test_it_computes_known_fragmentation_for_a_tiny_cluster():
    sc = build_scenario("tiny", seed=0, end=END, days=1)
    [g] = expected_fragmentation(sc, END - timedelta(hours=1))
    assert g == {
        "node_group": "tiny-pool",
        "gpu_model": "NVIDIA-H100-80GB-HBM3",
        "nodes": 3,
        "physical_gpus": 24,
        "allocatable_gpus": 24.0,
        "allocated_gpus": 11.0,
        "free_gpus": 5.0,
        "largest_free_block": 3,
        "placeable": {"1": 5, "2": 2, "4": 0, "8": 0},
        "stranded_gpus": {"1": 0, "2": 1, "4": 5, "8": 5},
        "zero_allocatable_nodes": 0,
    }
    assert expected_pending(sc, END - timedelta(hours=1)) == [
        {
            "namespace": "team-a",
            "name": "pending-4",
            "kind": "pod",
            "gpus": 4.0,
            "node_group": "tiny-pool",
            "reason": "fragmentation",
        }
    ]


def test_it_explains_why_demo_work_is_pending(demo):
    reasons = {(p["kind"], p["reason"]) for p in expected_pending(demo, demo.end)}
    assert reasons == {("pod", "fragmentation"), ("pod", "capacity"), ("pod", "other"), ("workload", "quota")}
    h100 = next(g for g in expected_fragmentation(demo, demo.end) if g["node_group"] == "h100-train")
    assert h100["free_gpus"] == 4 and h100["largest_free_block"] == 2


def test_it_matches_the_served_cluster_queue_status(demo):
    rows = expected_queues(demo, demo.end)
    cqs = {c["metadata"]["name"]: c for c in k8s_objects(demo, "clusterqueues", demo.end.timestamp())}
    for r in rows:
        if r["resource"] != "nvidia.com/gpu":
            continue
        status = cqs[r["cluster_queue"]]["status"]
        fl = next(f for f in status["flavorsReservation"] if f["name"] == r["flavor"])
        res = next(x for x in fl["resources"] if x["name"] == r["resource"])
        assert float(res["total"]) == r["reserved"] and float(res["borrowed"]) == r["borrowed"]
        assert status["pendingWorkloads"] == r["pending_workloads"]
    research = next(r for r in rows if r["cluster_queue"] == "research-cq" and r["resource"] == "nvidia.com/gpu")
    assert (research["nominal_quota"], research["borrowing_limit"], research["lending_limit"]) == (16, 8, 4)
    assert research["borrowed"] == 8 and research["pending_workloads"] == 1


def test_it_is_deterministic_from_the_seed():
    a = build_scenario("demo", seed=3, end=END)
    b = build_scenario("demo", seed=3, end=END)
    c = build_scenario("demo", seed=4, end=END)
    t = END - timedelta(hours=30)
    assert k8s_objects(a, "pods", t) == k8s_objects(b, "pods", t)
    assert dcgm_samples(a, t) == dcgm_samples(b, t)
    assert dcgm_samples(a, t) != dcgm_samples(c, t)


def test_it_builds_the_large_scenario_with_ten_thousand_gpus():
    sc = build_scenario("large", seed=0, end=END)
    assert len(sc.nodes) == 1250 and sum(n.gpus for n in sc.nodes) == 10000
    assert sc.cluster_name == "sim-large"
    rows = dcgm_samples(sc, END - timedelta(minutes=30))
    assert len({r[1]["UUID"] for r in rows}) == 10000
