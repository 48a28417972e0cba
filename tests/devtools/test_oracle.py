"""Ground-truth oracle sanity and known numbers."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from datetime import timedelta

import pytest

from devtools.simulator.exposition import dcgm_samples
from devtools.simulator.objects import k8s_objects
from devtools.simulator.scenarios import build_scenario
from tests.devtools.conftest import END
from tests.harness import cache
from tests.oracle import (
    HARDWARE_XIDS,
    expected_findings,
    expected_fragmentation,
    expected_ledger,
    expected_pending,
    expected_queues,
    expected_usage_by_workload,
    expected_workload,
)

# The oracle's answers over the demo are pure functions of the simulator's and the oracle's code (the demo is built
# from fixed arguments): cached on disk by content (tests/harness/cache.py).
ORACLE_SOURCES = cache.source_files("devtools/simulator", "tests/oracle")
DEMO_ARGS = ["demo", "seed=0", END.isoformat()]


@pytest.fixture(scope="module")
def ledger(demo):
    return cache.pickled("oracle-ledger", lambda: expected_ledger(demo, demo.start, demo.end), parts=DEMO_ARGS,
                         files=ORACLE_SOURCES)


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


@pytest.mark.slow
def test_it_builds_the_large_scenario_with_ten_thousand_gpus():
    sc = build_scenario("large", seed=0, end=END)
    assert len(sc.nodes) == 1250 and sum(n.gpus for n in sc.nodes) == 10000
    assert sc.cluster_name == "sim-large"
    rows = dcgm_samples(sc, END - timedelta(minutes=30))
    assert len({r[1]["UUID"] for r in rows}) == 10000


def _pod(demo, name):
    return next(p for p in demo.pods if p.name == name or p.name.startswith(name + "-"))


def test_it_names_every_workload_by_its_top_controller(demo):
    assert expected_workload(_pod(demo, "asr")) == "Deployment/asr"  # ReplicaSet -> Deployment
    assert expected_workload(_pod(demo, "llama-70b-0")) == "LeaderWorkerSet/llama-70b"  # the leader
    assert expected_workload(_pod(demo, "llama-70b-0-1")) == "LeaderWorkerSet/llama-70b"  # its worker
    assert expected_workload(_pod(demo, "thumbs-000")) == "CronJob/thumbs"  # Job -> CronJob
    assert expected_workload(_pod(demo, "embed-shards-shard-1-0")) == "JobSet/embed-shards"  # Job -> JobSet
    assert expected_workload(_pod(demo, "llama-sft-worker-0")) == "PyTorchJob/llama-sft"
    assert expected_workload(_pod(demo, "jupyter-hana-0")) == "StatefulSet/jupyter-hana"
    assert expected_workload(_pod(demo, "train-resnet")) == "Job/train-resnet"  # a Job without controller
    assert expected_workload(_pod(demo, "bench-nccl")) == f"Pod/{_pod(demo, 'bench-nccl').name}"
    # where the chain ends at a Job, an operator label names the custom resource
    pod = dataclasses.replace(_pod(demo, "train-resnet"), owner_parent=None,
                              labels={"training.kubeflow.org/job-name": "x",
                                      "training.kubeflow.org/operator-name": "mpijob-controller"})
    assert expected_workload(pod) == "MPIJob/x"


def test_its_usage_by_workload_adds_up_to_the_teams(demo):
    start, end = demo.start + timedelta(days=1), demo.start + timedelta(days=2)
    by_workload = expected_usage_by_workload(demo, start, end)
    teams = expected_ledger(demo, start, end).team_hours
    totals: dict = defaultdict(lambda: defaultdict(float))
    for (team, _namespace, _workload, hour), v in by_workload.items():
        for k, x in v.items():
            totals[(hour, team)][k] += x
    assert totals.keys() == teams.keys()
    for key, v in teams.items():
        for k in ("allocated", "working", "idle", "unmeasured"):
            assert totals[key][k] == pytest.approx(v[k], abs=1e-9)
    sft = {k[3]: v for k, v in by_workload.items() if k[2] == "PyTorchJob/llama-sft"}
    assert len(sft) == 15 and all(v["allocated"] == pytest.approx(8.0) for v in sft.values())
    shards = {k[3]: v for k, v in by_workload.items() if k[2] == "JobSet/embed-shards"}
    # the failed shard hangs 2 h on its vanished GPU: unmeasured, neither working nor idle
    assert sum(v["unmeasured"] for v in shards.values()) == pytest.approx(2.0)
    assert {k[:2] for k in by_workload if k[2] == "JobSet/embed-shards"} == {("data", "batch")}


@pytest.fixture(scope="module")
def findings(demo):
    return cache.pickled("oracle-findings", lambda: expected_findings(demo, demo.start, demo.end), parts=DEMO_ARGS,
                         files=ORACLE_SOURCES)


def _hours(demo, f):
    return ((f["start"] - demo.start) / timedelta(hours=1),
            None if f["end"] is None else (f["end"] - demo.start) / timedelta(hours=1))


def test_it_finds_the_unhealthy_gpus_of_the_demo(demo, findings):
    got = defaultdict(list)
    for f in findings["unhealthy_gpu"]:
        got[(f["node"], f["reason"])].append(f)
    uuid = {(n, g): demo.gpu_entity(n, g).uuid for n in ("a100-0", "a100-mig-0", "h100-train-2") for g in (5, 6, 7)}
    # a100-0 GPU 6: XID 64 and a row remap failure under train-resnet, never repaired: ongoing
    [xid64] = got[("a100-0", "xid")]
    assert (xid64["gpu_uuid"], _hours(demo, xid64)) == (uuid[("a100-0", 6)], (19, 20))
    assert xid64["detail"]["xid_codes"] == [64]
    [remap] = got[("a100-0", "remap")]
    assert _hours(demo, remap) == (19, None) and remap["gpu_hours"] == 149 and remap["detail"]["row_remap_failure"]
    assert remap["workload"] == "Job/train-resnet" and remap["detail"]["held_gpu_hours"] == pytest.approx(1.0)
    # a100-mig-0 GPU 5 (reranker): XID 48 for one sample, one ECC double-bit error, one row remapped
    for reason in ("xid", "ecc", "remap"):
        [f] = got[("a100-mig-0", reason)]
        assert (f["gpu_uuid"], _hours(demo, f), f["workload"]) == (uuid[("a100-mig-0", 5)], (35, 36),
                                                                    "Deployment/reranker")
    assert got[("a100-mig-0", "xid")][0]["detail"]["xid_codes"] == [48]
    assert got[("a100-mig-0", "ecc")][0]["detail"]["ecc_dbe"] == 1
    assert got[("a100-mig-0", "remap")][0]["detail"]["uncorrectable_remapped_rows"] == 1  # correctable: no finding
    # h100-train-2 GPU 7: XID 79 for an hour under the JobSet's shard, then 5 h without series (2 still held)
    [xid79] = got[("h100-train-2", "xid")]
    assert (_hours(demo, xid79), xid79["detail"]["xid_codes"], xid79["workload"]) == ((38, 39), [79],
                                                                                       "JobSet/embed-shards")
    [gone] = got[("h100-train-2", "vanished")]
    assert (gone["gpu_uuid"], _hours(demo, gone), gone["gpu_hours"]) == (uuid[("h100-train-2", 7)], (39, 44), 5.0)
    assert gone["detail"]["held_gpu_hours"] == pytest.approx(2.0)
    # throttling: h100-train-0's HW power brake for 3 h; llm-pretrain's rank 1 (h100-train-1) thermally, ongoing
    brake = got[("h100-train-0", "throttle")]
    assert len(brake) == 8 and {_hours(demo, f) for f in brake} == {(40, 43)}
    assert brake[0]["detail"]["reasons"] == ["hw_slowdown", "hw_power_brake"]
    assert brake[0]["detail"]["throttled_seconds"] == 3 * 3600
    assert brake[0]["detail"]["power_violation_seconds"] == 3 * 3300  # the counter's hourly increases
    hot = got[("h100-train-1", "throttle")]
    assert len(hot) == 8 and {_hours(demo, f) for f in hot} == {(0, None)}
    assert hot[0]["detail"]["reasons"] == ["hw_slowdown", "sw_thermal"] and hot[0]["gpu_hours"] == 168
    assert set(got) == {("a100-0", "xid"), ("a100-0", "remap"), ("a100-mig-0", "xid"), ("a100-mig-0", "ecc"),
                        ("a100-mig-0", "remap"), ("h100-train-2", "xid"), ("h100-train-2", "vanished"),
                        ("h100-train-0", "throttle"), ("h100-train-1", "throttle")}
    # application XIDs (43 of failed etl-embed runs, 13 of ddp-mig) are no finding
    assert {code for windows in demo.xid_events.values() for *_w, code in windows} - HARDWARE_XIDS == {13, 43}


def test_it_finds_the_straggler_rogue_process_and_idle_held_notebook(demo, findings):
    [s] = findings["straggler"]
    assert (s["workload"], s["pod"], s["node"], _hours(demo, s)) == ("PyTorchJob/llama-sft", "llama-sft-worker-0",
                                                                      "h100-train-3", (36, 41))
    assert s["gpu_uuid"] == demo.gpu_entity("h100-train-3", 6).uuid and s["team"] == "research"
    assert 0.40 < s["detail"]["min_ratio"] < 0.47
    assert all(r["units"] == 8 and r["slowest"] < 0.42 and r["median"] > 0.88 for r in s["detail"]["per_hour"])
    assert s["gpu_hours"] == pytest.approx(7 * 5 * (1 - 0.4 / 0.9), rel=0.03)  # seven GPUs waiting 5 h
    [u] = findings["unattributed_activity"]
    assert (u["node"], u["gpu_uuid"], _hours(demo, u), u["gpu_hours"]) == ("l4-0", demo.gpu_entity("l4-0", 3).uuid,
                                                                            (33, 37), 4.0)
    assert 0.6 < u["detail"]["activity"] < 0.7 and u["pod"] is None
    [i] = findings["idle_held"]
    assert (i["pod"], i["workload"], i["team"], _hours(demo, i), i["gpu_hours"]) == (
        "jupyter-hana-0", "StatefulSet/jupyter-hana", "research", (33, 44), 11.0)
    assert i["detail"]["fb_used_mib"] > 40_000 and i["detail"]["activity"] < 0.01


def test_its_findings_in_a_window_end_where_the_window_ends(demo):
    window = expected_findings(demo, demo.start + timedelta(hours=36), demo.start + timedelta(hours=39))
    [s] = window["straggler"]
    assert _hours(demo, s) == (36, None)  # still straggling at the window's end: ongoing
    [u] = window["unattributed_activity"]
    assert _hours(demo, u) == (36, 37)
    assert window["idle_held"][0]["end"] is None
    with pytest.raises(ValueError, match="whole hours"):
        expected_findings(demo, demo.start + timedelta(minutes=5), demo.end)
