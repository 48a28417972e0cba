"""dcgm-exporter /metrics: parses with prometheus_client and has the real exporter's label shapes."""

from __future__ import annotations

import re
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from devtools.simulator.exposition import dcgm_samples

REAL_ORDER = ["gpu", "UUID", "pci_bus_id", "device", "modelName"]
REQUIRED = {
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
}


def _get(served, query=""):
    served.set_time(served.scenario.end)
    with urllib.request.urlopen(served.url + "/metrics" + query, timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        return r.read().decode()


def _label_names(line):
    return re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="', line[line.index("{") : line.index("}")])


@pytest.mark.parametrize("query,host", [("", "Hostname"), ("?hostname_label=hostname", "hostname")])
def test_it_exposes_parseable_metrics_with_the_real_label_order(served, query, host):
    text = _get(served, query)
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert set(fams) >= REQUIRED
    whole_tail = [host, "DCGM_FI_DRIVER_VERSION", "container", "namespace", "pod"]
    mig_tail = ["GPU_I_PROFILE", "GPU_I_ID"] + whole_tail
    seen_mig = seen_vgpu = seen_empty = False
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        names = _label_names(line)
        assert names[:5] == REAL_ORDER, line
        if "GPU_I_PROFILE" in names:
            seen_mig = True
            assert names[5:] == mig_tail, line
            assert not line.startswith("DCGM_FI_DEV_GPU_UTIL{"), "no GPU_UTIL on MIG instances"
        elif "vgpu" in names:
            seen_vgpu = True
            assert names[5:] == whole_tail + ["vgpu"], line
        else:
            assert names[5:] == whole_tail, line
        if 'pod=""' in line:
            seen_empty = True
    assert seen_mig and seen_vgpu and seen_empty


def test_it_exposes_the_prometheus_operator_shape_when_asked(served):
    text = _get(served, "?exported=1")
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    samples = fams["DCGM_FI_PROF_SM_ACTIVE"].samples
    held = [s for s in samples if s.labels.get("exported_pod")]
    assert held
    for s in samples:
        assert s.labels["namespace"] == "gpu-operator"
        assert s.labels["pod"].startswith("nvidia-dcgm-exporter-")
        assert "exported_namespace" in s.labels


def test_it_keeps_the_activity_relations_per_series(demo):
    rows = dcgm_samples(demo, demo.end)
    by = {}
    for metric, labels, value in rows:
        by.setdefault(tuple(sorted(labels.items())), {})[metric] = value
    checked = 0
    for key, m in by.items():
        sm, gr, tn = (
            m["DCGM_FI_PROF_SM_ACTIVE"],
            m["DCGM_FI_PROF_GR_ENGINE_ACTIVE"],
            m["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"],
        )
        assert 0 <= tn <= sm <= gr <= 1
        if "DCGM_FI_DEV_GPU_UTIL" in m:
            assert m["DCGM_FI_DEV_GPU_UTIL"] / 100 >= gr
            checked += 1
        if dict(key).get("GPU_I_ID"):
            assert "DCGM_FI_DEV_GPU_UTIL" not in m
    assert checked > 30


def test_it_repeats_the_device_value_for_every_time_sliced_tenant(demo):
    rows = [
        (lab, v)
        for m, lab, v in dcgm_samples(demo, demo.end)
        if m == "DCGM_FI_PROF_SM_ACTIVE" and lab["Hostname"] == "l4-ts-0" and lab["gpu"] == "0"
    ]
    assert len(rows) == 2 and {lab["vgpu"] for lab, _ in rows} == {"0", "1"}
    assert rows[0][1] == rows[1][1]


def test_it_drops_pod_identity_on_gpus_whose_labels_were_lost(demo):
    ent = demo.gpu_entity("a100-mig-0", 6)
    rows = [lab for m, lab, v in dcgm_samples(demo, demo.end) if lab["UUID"] == ent.uuid]
    assert rows and all(lab["pod"] == "" for lab in rows)
    holder = next(p for p in demo.pods if p.name == "feature-store-0")
    assert holder.held(demo.end.timestamp() - 1)
