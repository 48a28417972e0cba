"""The oracle's truth for DRA claims and HAMi fractions on the `mixed` cluster: identities, known numbers, findings,
fragmentation."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

import pytest

from devtools.simulator.model import MODELS
from devtools.simulator.scenarios import build_scenario
from tests.devtools.conftest import END, MIXED_DAYS
from tests.oracle import (
    MODES,
    expected_findings,
    expected_fragmentation,
    expected_ledger,
    expected_pending,
    expected_usage_by_workload,
)
from tests.oracle import accelerators as acc

H = timedelta(hours=1)
L4_MEM = MODELS["L4"]["memory"]


@pytest.fixture(scope="module")
def variants(mixed):
    return {"mixed": mixed, **{n: build_scenario(n, seed=0, end=END, days=MIXED_DAYS)
                               for n in ("mixed-v1beta1", "mixed-noattr")}}


@pytest.fixture(scope="module")
def ledger(mixed):
    return expected_ledger(mixed, mixed.start, mixed.end)


def _rows(led, prefix):
    return {r["hour"]: r for r in led.pod_hours if r["pod"].startswith(prefix)}


@pytest.mark.parametrize("name", ["mixed", "mixed-v1beta1", "mixed-noattr"])
@pytest.mark.parametrize("signal", ["sm_active", "gpu_util"])
def test_the_identities_hold_on_every_variant(variants, name, signal):
    sc = variants[name]
    led = expected_ledger(sc, sc.start, sc.end, signal)
    assert len(led.pod_hours) > 800 and led.claim_hours
    for r in led.rows:
        assert r["allocated"] == pytest.approx(r["working"] + r["idle"] + r["unmeasured"], abs=1e-9)
        assert r["allocated"] > 0 and r["working"] >= 0 and r["idle"] >= -1e-9 and r["unmeasured"] >= 0
    for v in led.node_hours.values():
        assert v["allocated"] <= v["capacity"] + 1e-9
        assert v["allocated"] + v["unallocated"] == pytest.approx(v["capacity"])
    totals = led.totals()
    teams = defaultdict(float)
    for (_hour, _team), v in led.team_hours.items():
        for k, x in v.items():
            teams[k] += x
    assert {k: teams[k] for k in totals} == pytest.approx(totals)
    assert sum(v["allocated"] for v in led.node_hours.values()) == pytest.approx(totals["allocated"])
    by_workload = expected_usage_by_workload(sc, sc.start, sc.end, signal)
    assert sum(v["allocated"] for v in by_workload.values()) == pytest.approx(totals["allocated"])
    assert ("platform", "platform", "ResourceClaim/reserved-h100-pair") in {k[:3] for k in by_workload}
    for n in sc.nodes:  # physical GPUs from the published or registered devices are the machine's
        assert acc.physical_gpus(sc, n) == n.gpus, n.name
    capacity = sum(v["capacity"] for v in led.node_hours.values())
    assert capacity == pytest.approx(sum(n.gpus for n in sc.nodes) * 24 * MIXED_DAYS)
    assert {r["allocation_mode"] for r in led.pod_hours} == set(MODES)


def test_a_shared_claim_splits_its_gpu_among_the_pods_consuming_it(ledger, mixed):
    rag, harness = _rows(ledger, "rag-api-"), _rows(ledger, "eval-harness-0")
    first = END - 14 * H  # the harness joins at :30
    assert harness[first]["allocated"] == pytest.approx(0.25) and rag[first]["allocated"] == pytest.approx(0.75)
    for h in (first + H, first + 5 * H):
        assert harness[h]["allocated"] == pytest.approx(0.5) and rag[h]["allocated"] == pytest.approx(0.5)
    assert rag[END - H]["allocated"] == pytest.approx(1.0)  # alone again
    assert set(harness) == {first + i * H for i in range(6)}
    for h, r in harness.items():  # the device is never billed twice
        assert r["allocated"] + rag[h]["allocated"] == pytest.approx(1.0)
    assert {(r["team"], r["workload"]) for r in harness.values()} == {("research", "Job/eval-harness")}
    assert {(r["team"], r["workload"]) for r in rag.values()} == {("serving", "Deployment/rag-api")}
    assert all(r["allocation_mode"] == "dra" and r["unmeasured"] == 0 for r in harness.values())


def test_a_claim_with_no_consumer_is_idle_for_its_namespace_and_team(ledger):
    rows = [r for r in ledger.claim_hours if r["claim"] == "reserved-h100-pair"]
    assert [r["hour"] for r in rows] == [END - (12 - i) * H for i in range(7)]
    assert all((r["allocated"], r["idle"], r["working"], r["unmeasured"]) == (2.0, 2.0, 0.0, 0.0) for r in rows)
    assert {(r["namespace"], r["team"], r["workload"], r["node"], r["pod"]) for r in rows} == {
        ("platform", "platform", "ResourceClaim/reserved-h100-pair", "dra-h100-1", None)}
    assert len(ledger.claim_hours) == 7  # generated claims live and die with their pods: never idle
    consumer = _rows(ledger, "capacity-test-0")
    assert sum(r["allocated"] for r in consumer.values()) == pytest.approx(28.0)  # 2 GPUs x 14 h
    assert not _rows(ledger, "dcgm-probe")  # the admin-access claim holds nothing


def test_dra_mig_devices_weigh_their_slices(ledger):
    assert [r["allocated"] for r in _rows(ledger, "tts-mig-").values()] == pytest.approx([3 / 7] * 60)  # 60 h
    kim = [r["allocated"] for r in _rows(ledger, "jupyter-kim-0").values()]
    assert kim == pytest.approx([1 / 7] * 22)
    pipeline = list(_rows(ledger, "pipeline-").values())
    assert pipeline[-1]["allocated"] == pytest.approx(3 / 7) and len(pipeline[-1]["units"]) == 2
    legacy = _rows(ledger, "legacy-cuda-")
    assert sum(r["allocated"] for r in legacy.values()) == pytest.approx(6.0)  # from its claim, counted once


def test_hami_tenants_hold_their_fraction_and_share_an_oversubscribed_gpu(ledger, mixed):
    def full(prefix):
        return next(r for h, r in sorted(_rows(ledger, prefix).items()) if h >= mixed.start + H)

    assert full("feature-cache-")["allocated"] == pytest.approx(6000 / L4_MEM)  # memory only: not a whole GPU
    assert full("asr-hami-")["allocated"] == pytest.approx(0.3)
    assert _rows(ledger, "jupyter-lee-0")[END - H]["allocated"] == pytest.approx(0.4)  # cores win over memory
    assert _rows(ledger, "transcode-")[END - 3 * H]["allocated"] == pytest.approx(0.4)  # 2 GPUs x 20 %
    assert _rows(ledger, "exclusive-0")[END - H]["allocated"] == pytest.approx(1.0)
    tenants = {p: _rows(ledger, p) for p in ("tenant-a-0", "tenant-b-0", "tenant-c-0")}
    for h in (END - 16 * H, END - 10 * H, END - 7 * H):  # all three the whole hour: 1/3 each
        assert [tenants[p][h]["allocated"] for p in tenants] == pytest.approx([1 / 3] * 3)
    joins, leaves = END - 17 * H, END - 6 * H  # c joins at :30; b leaves at :30
    assert tenants["tenant-c-0"][joins]["allocated"] == pytest.approx(0.5 / 3)
    assert tenants["tenant-a-0"][joins]["allocated"] == pytest.approx(0.25 + 0.5 / 3)
    assert tenants["tenant-b-0"][leaves]["allocated"] == pytest.approx(0.5 / 3)
    for h in tenants["tenant-a-0"]:
        if END - 20 * H <= h < END - 3 * H:  # two tenants at 50 % fill the GPU exactly; three are scaled to it
            assert sum(t[h]["allocated"] for t in tenants.values() if h in t) == pytest.approx(1.0), h
    for pidx, allocs in mixed.hami_allocs.items():  # the model's unit shares are the spec's raw shares
        pod = mixed.pods[pidx]
        assert [u.share for u in pod.units] == pytest.approx([acc.hami_share(mixed, pod.node, a) for a in allocs])
    # measured by the GPU's series although they carry no pod: working = share x the GPU's value
    row = tenants["tenant-a-0"][END - 10 * H]
    assert row["unmeasured"] == 0 and row["working"] == pytest.approx(row["allocated"] * row["units"][0]["activity"])


def test_without_attribution_dra_units_are_unmeasured_and_the_rest_is_not(variants):
    sc = variants["mixed-noattr"]
    led = expected_ledger(sc, sc.start, sc.end)
    by_mode = defaultdict(lambda: [0.0, 0.0])
    for r in led.pod_hours:
        by_mode[r["allocation_mode"]][0] += r["allocated"]
        by_mode[r["allocation_mode"]][1] += r["unmeasured"]
    assert by_mode["dra"][1] == pytest.approx(by_mode["dra"][0]) and by_mode["dra"][0] > 400
    assert all(by_mode[m][1] == 0 for m in ("device_plugin", "time_slice", "mig", "hami"))
    assert not any(r["pod"].startswith("legacy-cuda-") for r in
                   expected_ledger(variants["mixed-v1beta1"], END - 12 * H, END).pod_hours)


def test_its_findings_on_dra_and_hami_gpus(variants, mixed):
    found = expected_findings(mixed, mixed.start, mixed.end)
    [idle] = found["idle_claim"]
    assert (idle["namespace"], idle["team"], idle["workload"], idle["node"]) == (
        "platform", "platform", "ResourceClaim/reserved-h100-pair", "dra-h100-1")
    assert (idle["start"], idle["end"], idle["hours"], idle["gpu_hours"]) == (END - 12 * H, END - 5 * H, 7, 14.0)
    assert idle["gpu_uuid"] == mixed.gpu_entity("dra-h100-1", 0).uuid
    [over] = found["oversubscribed_gpu"]
    assert (over["node"], over["gpu_uuid"]) == ("hami-a100-0", mixed.gpu_entity("hami-a100-0", 0).uuid)
    assert (over["start"], over["end"], over["hours"]) == (END - 17 * H, END - 5 * H, 12)
    assert over["gpu_hours"] == pytest.approx(11.0) and over["detail"]["max_share_sum"] == pytest.approx(1.5)
    assert (over["pod"], over["team"]) == ("tenant-a-0", "serving")
    assert {t["pod"] for t in over["detail"]["tenants"]} == {"tenant-a-0", "tenant-b-0", "tenant-c-0"}
    assert found["missing_attribution"] == []
    dra_or_hami = {n.name for n in mixed.nodes if n.kind in ("dra", "hami")}
    for sc in variants.values():
        assert not {f["node"] for f in expected_findings(sc, sc.start, sc.end)["unattributed_activity"]} & dra_or_hami
        for at in (END - 20 * H, END - 10 * H, END - H):
            assert all(g["zero_allocatable_nodes"] == 0 for g in expected_fragmentation(sc, at))
    noattr = variants["mixed-noattr"]
    missing = expected_findings(noattr, noattr.start, noattr.end)["missing_attribution"]
    assert {f["node"] for f in missing} == {"dra-h100-0", "dra-h100-1", "dra-mig-0"}
    assert all(f["team"] is None and f["gpu_hours"] > 0 for f in missing)
    led = expected_ledger(noattr, noattr.start, noattr.end)
    assert sum(f["gpu_hours"] for f in missing) == pytest.approx(
        sum(r["unmeasured"] for r in led.pod_hours if r["allocation_mode"] == "dra"))


def test_fragmentation_counts_published_minus_held_devices(mixed):
    groups = {g["node_group"]: g for g in expected_fragmentation(mixed, END - 10 * H)}
    dra = groups["dra-h100"]
    assert (dra["physical_gpus"], dra["allocatable_gpus"], dra["allocated_gpus"], dra["free_gpus"]) == (16, 16, 14, 2)
    assert (dra["largest_free_block"], dra["placeable"]["2"]) == (2, 1)  # dra-h100-1's gpu-2 and gpu-3
    aks = groups["migpool"]  # GPU 0: whole + 7/7 published, 4/7 held; GPU 1: 6/7, 3/7 held; GPU 2 held; GPU 3 free
    assert aks["allocatable_gpus"] == pytest.approx(1 + 6 / 7 + 2) and aks["allocated_gpus"] == pytest.approx(2.0)
    assert aks["free_gpus"] == pytest.approx(3 / 7 + 3 / 7 + 1)
    assert aks["largest_free_block"] == 1  # GPU 0's whole device is published but a MIG device of it is held
    hami = groups["hami-l4"]
    assert hami["allocated_gpus"] == pytest.approx(0.3 + 6000 / L4_MEM + 0.4) and hami["largest_free_block"] == 0
    a100 = groups["NVIDIA-A100-SXM4-80GB"]  # no pool label, no GFD label: the model names the group
    assert (a100["physical_gpus"], a100["allocated_gpus"], a100["free_gpus"]) == (2, 2.0, 0.0)
    for at in (END - 30 * H, END - 17 * H, END - 3 * H, END):
        for g in expected_fragmentation(mixed, at):
            assert g["free_gpus"] == pytest.approx(g["allocatable_gpus"] - g["allocated_gpus"]), (at, g)
            assert g["allocated_gpus"] <= g["allocatable_gpus"] + 1e-9
    assert expected_pending(mixed, END - H) == []


def test_a_collection_of_the_last_day_sees_every_case():
    """The collection tests read the last 24 hours of a 2-day world: every DRA and HAMi case is in them."""
    sc = build_scenario("mixed", seed=0, end=END, days=2)
    start = END - 24 * H
    led = expected_ledger(sc, start, END)
    assert {r["allocation_mode"] for r in led.pod_hours} == set(MODES)
    assert {r["claim"] for r in led.claim_hours} == {"reserved-h100-pair"}
    pods = {r["pod"] for r in led.pod_hours}
    assert {"eval-harness-0", "jupyter-kim-0", "tenant-c-0", "capacity-test-0"} <= pods
    for prefix in ("legacy-cuda-", "feature-cache-", "pipeline-", "embed-"):
        assert any(p.startswith(prefix) for p in pods), prefix
    found = expected_findings(sc, start, END)
    assert len(found["idle_claim"]) == 1 and len(found["oversubscribed_gpu"]) == 1
