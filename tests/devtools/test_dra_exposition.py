"""dcgm-exporter's series of GPUs handed out by DRA (with and without its DRA attribution) and by HAMi."""

from __future__ import annotations

import urllib.request
from datetime import timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from devtools.simulator.exposition import dcgm_samples
from devtools.simulator.scenarios import build_scenario
from tests.devtools.conftest import END, MIXED_DAYS

AT = END - timedelta(hours=10)
DRA_LABELS = {"dra_claim_name", "dra_claim_namespace", "dra_device_name", "dra_driver_name", "dra_pool_name"}
MIG_LABELS = {"dra_mig_profile", "dra_mig_device_uuid"}


def _sm(sc, at=AT, **kw):
    return [(lab, v) for m, lab, v in dcgm_samples(sc, at, **kw) if m == "DCGM_FI_PROF_SM_ACTIVE"]


def _on(rows, node):
    return [(lab, v) for lab, v in rows if lab["Hostname"] == node]


def test_dra_series_carry_the_consumer_and_the_claim(mixed):
    rows = _sm(mixed)
    held = [(lab, v) for lab, v in _on(rows, "dra-h100-0") if lab["pod"]]
    assert held and all(set(lab) >= DRA_LABELS and not MIG_LABELS & set(lab) for lab, _v in held)
    assert all("pod_uid" not in lab and "uid" not in lab for lab, _v in rows)
    gpu3 = [lab for lab, _v in held if lab["gpu"] == "3"]
    [lab] = gpu3
    assert lab["UUID"] == mixed.gpu_entity("dra-h100-0", 3).uuid and lab["dra_device_name"] == "gpu-3"
    assert (lab["dra_driver_name"], lab["dra_pool_name"], lab["dra_claim_namespace"]) == (
        "gpu.nvidia.com", "dra-h100-0", "training")
    assert lab["dra_claim_name"].startswith(lab["pod"] + "-gpu-") and lab["container"] == "pytorch"
    # a shared claim: one copy per consuming pod, same value
    shared = [(lab, v) for lab, v in held if lab["dra_claim_name"] == "shared-h100"]
    assert sorted(lab["pod"] for lab, _v in shared)[0] == "eval-harness-0" and len(shared) == 2
    assert len({v for _lab, v in shared}) == 1 and {lab["UUID"] for lab, _v in shared} == {
        mixed.gpu_entity("dra-h100-0", 6).uuid}
    # the admin-access monitoring pod is no consumer the exporter names; the idle claim's GPUs carry no pod
    assert not any(lab["pod"].startswith("dcgm-probe") for lab, _v in rows)
    idle = [lab for lab, _v in _on(rows, "dra-h100-1") if lab["gpu"] in ("0", "1")]
    assert len(idle) == 2 and all(lab["pod"] == "" and not DRA_LABELS & set(lab) for lab in idle)


def test_dra_mig_series_keep_the_parent_uuid_and_name_the_mig_device(mixed):
    rows = [(lab, v) for lab, v in _on(_sm(mixed), "dra-mig-0") if lab.get("GPU_I_ID") and lab["pod"]]
    assert {lab["dra_mig_profile"] for lab, _v in rows} == {"3g.40gb", "2g.20gb", "1g.10gb"}
    for lab, _v in rows:
        device = next(d for d in mixed.dra_devices["dra-mig-0"] if d.name == lab["dra_device_name"])
        assert lab["UUID"] == device.parent_uuid == mixed.gpu_entity("dra-mig-0", device.minor).uuid
        assert lab["dra_mig_device_uuid"] == device.uuid and lab["GPU_I_PROFILE"] == device.profile
    pipeline = {lab["container"]: lab["dra_device_name"] for lab, _v in rows if lab["pod"].startswith("pipeline-")}
    assert pipeline == {"ctr0": "gpu-1-mig-2g20gb-14-4", "ctr1": "gpu-1-mig-1g10gb-19-6"}


def test_under_prometheus_operator_only_pod_namespace_container_are_renamed(mixed):
    rows = _on(_sm(mixed, exported_labels=True), "dra-h100-0")
    held = [lab for lab, _v in rows if lab.get("exported_pod")]
    assert held and all(set(lab) >= DRA_LABELS and "exported_container" in lab for lab in held)
    assert all(lab["dra_claim_namespace"] == lab["exported_namespace"] for lab in held)


def test_without_dra_attribution_dra_devices_have_device_series_only():
    sc = build_scenario("mixed-noattr", seed=0, end=END, days=MIXED_DAYS)
    rows = _sm(sc)
    for node in ("dra-h100-0", "dra-h100-1", "dra-mig-0"):
        node_rows = _on(rows, node)
        assert node_rows and all(lab["pod"] == "" and not DRA_LABELS & set(lab) for lab, _v in node_rows)
    assert any(lab["pod"] for lab, _v in _on(rows, "dp-h100-0"))  # the device plugin's GPUs keep their pods
    assert any(v > 0.3 for _lab, v in _on(rows, "dra-h100-0"))  # the work is there, unattributed


def test_hami_gpus_series_carry_no_pod(mixed):
    rows = _sm(mixed)
    for node in ("hami-l4-0", "hami-a100-0"):
        node_rows = _on(rows, node)
        assert len(node_rows) == 2 and all(lab["pod"] == "" for lab, _v in node_rows)
    busy = {lab["gpu"]: v for lab, v in _on(rows, "hami-a100-0")}
    assert busy["0"] > 0.5  # three tenants' work on one GPU, summed (capped at 1)


@pytest.mark.parametrize("query", ["", "?exported=1&hostname_label=hostname"])
def test_the_metrics_endpoint_parses(mixed_served, query):
    mixed_served.set_time(AT)
    with urllib.request.urlopen(mixed_served.url + "/metrics" + query, timeout=10) as r:
        text = r.read().decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    samples = fams["DCGM_FI_PROF_SM_ACTIVE"].samples
    assert any(s.labels.get("dra_mig_device_uuid", "").startswith("MIG-") for s in samples)
    pod = "exported_pod" if query else "pod"
    shared = [s for s in samples if s.labels.get("dra_claim_name") == "shared-h100"]
    assert len(shared) == 2 and "eval-harness-0" in {s.labels[pod] for s in shared}
