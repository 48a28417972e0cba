"""dcgm-exporter /metrics: parses with prometheus_client and has the real exporter's label shapes."""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from devtools.simulator.exposition import LEGACY_CLOCK_EVENTS, dcgm_samples
from devtools.simulator.model import SEG
from tests.fixtures import dcgm_series


def _label_names(line):
    return re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="', line[line.index("{") : line.index("}")])


# Label order of a real exporter's MIG line (tests/fixtures/dcgm_series.py): the device's five labels, then
# GPU_I_PROFILE and GPU_I_ID (MIG only), the host, the driver and the holder.
REAL_MIG_LABELS = _label_names(dcgm_series.MIG_INSTANCE_HELD)
REAL_ORDER = REAL_MIG_LABELS[:5]
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
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    "DCGM_FI_DEV_POWER_VIOLATION",
    "DCGM_FI_DEV_THERMAL_VIOLATION",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
}
DEVICE_LEVEL = {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
                "DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_DEV_THERMAL_VIOLATION", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
                "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
                "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"}
REMAP = {"DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
         "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"}
COUNTERS = {"DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_DEV_THERMAL_VIOLATION", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
            "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"}
H = 3600


def _get(served, query=""):
    served.set_time(served.scenario.end)
    with urllib.request.urlopen(served.url + "/metrics" + query, timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        return r.read().decode()


@pytest.mark.parametrize("query,host", [("", "Hostname"), ("?hostname_label=hostname", "hostname")])
def test_it_exposes_parseable_metrics_with_the_real_label_order(served, query, host):
    text = _get(served, query)
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert set(fams) >= REQUIRED
    assert {name for name, f in fams.items() if f.type == "counter"} == COUNTERS  # as dcgm-exporter types them
    mig_tail = [host if name == "Hostname" else name for name in REAL_MIG_LABELS[5:]]
    whole_tail = [name for name in mig_tail if name not in ("GPU_I_PROFILE", "GPU_I_ID")]
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


def test_it_names_the_clock_event_reasons_the_old_way_when_asked(served):
    text = _get(served, "?rename=DCGM_FI_DEV_CLOCKS_EVENT_REASONS=DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")
    fams = {f.name for f in text_string_to_metric_families(text)}
    assert "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS" in fams and "DCGM_FI_DEV_CLOCKS_EVENT_REASONS" not in fams
    new = dcgm_samples(served.scenario, served.scenario.end)
    old = dcgm_samples(served.scenario, served.scenario.end, renames=LEGACY_CLOCK_EVENTS)
    assert [(LEGACY_CLOCK_EVENTS.get(m, m), lab, v) for m, lab, v in new] == old


def _at(demo, offset_hours: float):
    return demo.t0 + offset_hours * H


def _by_uuid(demo, t, metric):
    return [(lab, v) for m, lab, v in dcgm_samples(demo, t) if m == metric]


def test_device_level_fields_are_on_gpus_only_and_remapping_on_hbm_gpus_only(demo):
    rows = dcgm_samples(demo, demo.end)
    mig = {m for m, lab, _v in rows if lab.get("GPU_I_ID")}
    assert mig and not mig & DEVICE_LEVEL and "DCGM_FI_DEV_XID_ERRORS" in mig
    l4 = {m for m, lab, _v in rows if lab["modelName"] == "NVIDIA L4"}
    assert not l4 & REMAP and l4 >= DEVICE_LEVEL - REMAP
    h100 = {m for m, lab, _v in rows if lab["modelName"].startswith("NVIDIA H100") and not lab.get("GPU_I_ID")}
    assert h100 >= DEVICE_LEVEL


def test_it_shows_the_health_events_of_the_demo(demo):
    reranker = demo.gpu_entity("a100-mig-0", 5).uuid
    xid = {t: {v for lab, v in _by_uuid(demo, _at(demo, t), "DCGM_FI_DEV_XID_ERRORS") if lab["UUID"] == reranker}
           for t in (35 + 15 / 60, 35 + 20 / 60, 35 + 25 / 60)}
    assert xid == {35.25: {0}, 35 + 20 / 60: {48}, 35 + 25 / 60: {0}}  # one 5-minute sample: max_over_time sees it
    for metric, before, after in (("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 0, 1),
                                  ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", 0, 1)):
        got = [{v for lab, v in _by_uuid(demo, _at(demo, t), metric) if lab["UUID"] == reranker} for t in (35, 36)]
        assert got == [{before}, {after}]  # monotonic counters
    # HW power brake on h100-train-0 for 3 h: the bitmask, and the power violation counter (ns) stepping by the
    # throttled time of the segment before
    node0 = {e.uuid for e in (demo.gpu_entity("h100-train-0", g) for g in range(8))}

    def node0_values(metric, t):
        return {v for lab, v in _by_uuid(demo, t, metric) if lab["UUID"] in node0}

    assert node0_values("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", _at(demo, 41)) == {0x88}
    assert node0_values("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", _at(demo, 39.5)) == {0}
    assert node0_values("DCGM_FI_DEV_POWER_VIOLATION", _at(demo, 40)) == {0}
    assert node0_values("DCGM_FI_DEV_POWER_VIOLATION", _at(demo, 40) + SEG) == {SEG * 1e9}
    assert node0_values("DCGM_FI_DEV_POWER_VIOLATION", _at(demo, 50)) == {3 * H * 1e9}
    # llm-pretrain's rank 1 is thermally throttled all along (SW thermal + HW slowdown)
    node1 = {e.uuid for e in (demo.gpu_entity("h100-train-1", g) for g in range(8))}
    assert {v for lab, v in _by_uuid(demo, demo.end, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS") if lab["UUID"] in node1} \
        == {0x28}
    # a100-0 GPU 6: the row remap failure stays
    bad = demo.gpu_entity("a100-0", 6).uuid
    assert {v for lab, v in _by_uuid(demo, demo.end, "DCGM_FI_DEV_ROW_REMAP_FAILURE") if lab["UUID"] == bad} == {1}


def test_a_vanished_gpu_has_no_series_while_its_node_stays(demo):
    gone = demo.gpu_entity("h100-train-2", 7).uuid
    for hours, present in ((38.5, True), (39, False), (43.9, False), (44, True)):
        uuids = {lab["UUID"] for _m, lab, _v in dcgm_samples(demo, _at(demo, hours))}
        assert (gone in uuids) is present, hours
        assert demo.gpu_entity("h100-train-2", 6).uuid in uuids
    xid = {v for lab, v in _by_uuid(demo, _at(demo, 38.5), "DCGM_FI_DEV_XID_ERRORS") if lab["UUID"] == gone}
    assert xid == {79}


def test_a_rogue_process_shows_on_a_device_series_without_pod(demo):
    rogue = demo.gpu_entity("l4-0", 3).uuid
    for hours, busy in ((32.9, False), (33, True), (36.9, True), (37, False)):
        [(lab, sm)] = [(lab, v) for lab, v in _by_uuid(demo, _at(demo, hours), "DCGM_FI_PROF_SM_ACTIVE")
                       if lab["UUID"] == rogue]
        assert lab["pod"] == lab["namespace"] == lab["container"] == ""
        assert (sm > 0.5) is busy, hours


def test_an_idle_held_notebook_keeps_its_memory_and_idle_ones_release_it(demo):
    def fb_and_sm(pod, t):
        vals = {m: v for m, lab, v in dcgm_samples(demo, t) if lab["pod"] == pod}
        return vals["DCGM_FI_DEV_FB_USED"], vals["DCGM_FI_PROF_SM_ACTIVE"]

    fb, sm = fb_and_sm("jupyter-hana-0", _at(demo, 40))
    assert fb > 40_000 and sm < 0.01  # ~45 GiB held, nothing computed
    fb, sm = fb_and_sm("jupyter-alice-0", _at(demo, 40))
    assert fb < 1024 and sm < 0.01  # idle, kernel stopped: a CUDA context at most


def test_a_straggling_rank_runs_at_forty_percent_while_its_peers_run_at_ninety(demo):
    sms = sorted(v for m, lab, v in dcgm_samples(demo, _at(demo, 38))
                 if m == "DCGM_FI_PROF_SM_ACTIVE" and lab["pod"].startswith("llama-sft-"))
    assert len(sms) == 8 and sms[0] < 0.45 and sms[1] > 0.85
    sms = [v for m, lab, v in dcgm_samples(demo, _at(demo, 42))
           if m == "DCGM_FI_PROF_SM_ACTIVE" and lab["pod"].startswith("llama-sft-")]
    assert len(sms) == 8 and min(sms) > 0.85


def test_recorded_health_is_stored_only_where_it_has_something_to_report(demo, tmp_path):
    """With the recording rules, the export holds a recorded health sample exactly where the rules keep one: per
    GPU, field and scrape, the maximum of the raw series when it passes the rules' filter (clock events >= 8, the
    rest > 0), and nothing else; the simulated Prometheus stores the same. The hour holds the demo's power brake
    starting on h100-train-0 (clock events 0 -> 0x88, power violation from 0), a throttled rank all along (0x28)
    and a row remap failure: kept and dropped values both."""
    from collections import Counter

    from devtools.simulator.exposition import (
        HEALTH_RECORDED,
        HEALTH_RECORDED_BY,
        HEALTH_RECORDED_FIELDS,
        export_openmetrics,
        health_recorded_kept,
    )
    from devtools.simulator.prometheus_api import start_prometheus
    from devtools.simulator.scenarios import build_scenario

    sc = build_scenario("demo", seed=0, end=demo.end, with_dra=False)
    sc.recording_rules = True
    start, end = _at(sc, 39.5), _at(sc, 40.5)
    path = tmp_path / "hour.om"
    export_openmetrics(sc, start, end, path, step=30, include_ksm=False)
    raw: dict = {}
    recorded: dict = {}
    for family in text_string_to_metric_families(path.read_text()):
        for s in family.samples:
            gpu = tuple((k, s.labels[k]) for k in HEALTH_RECORDED_BY if s.labels.get(k))
            if s.name == HEALTH_RECORDED:
                recorded[(gpu, s.labels["field"], s.timestamp)] = s.value
            elif s.name in HEALTH_RECORDED_FIELDS:
                key = (gpu, HEALTH_RECORDED_FIELDS[s.name], s.timestamp)
                raw[key] = max(raw.get(key, s.value), s.value)
    kept = {key: v for key, v in raw.items() if health_recorded_kept(key[1], v)}
    assert recorded == kept
    fields = {field for _gpu, field, _t in kept}
    assert {"clock_events", "power_violation", "row_remap_failure"} <= fields
    assert len(kept) < len(raw) / 10  # most GPUs are healthy: nothing stored for them
    assert {field for (_gpu, field, _t), v in raw.items() if not health_recorded_kept(field, v)} \
        >= {"clock_events", "power_violation"}  # the brake's first scrapes: below the filter, dropped
    # The simulated Prometheus holds the same samples: per GPU and field, as many over the hour, and at an instant
    # no value the rules would not have stored.
    srv = start_prometheus(sc, step=30)

    def ask(query: str, at: float) -> dict:
        url = f"{srv.url}/api/v1/query?query={urllib.parse.quote(query)}&time={at}"
        with urllib.request.urlopen(url) as r:
            answer = json.loads(r.read())["data"]["result"]
        return {(tuple((k, r["metric"][k]) for k in HEALTH_RECORDED_BY if r["metric"].get(k)), r["metric"]["field"]):
                float(r["value"][1]) for r in answer}

    try:
        counts = ask(f"count_over_time({HEALTH_RECORDED}[1h])", end - 1)
        now = ask(HEALTH_RECORDED, end - 1)
    finally:
        srv.stop()
    assert counts == Counter((gpu, field) for gpu, field, _t in kept)
    last = max(t for _gpu, _field, t in raw)
    assert now == {(gpu, field): v for (gpu, field, t), v in kept.items() if t == last}
