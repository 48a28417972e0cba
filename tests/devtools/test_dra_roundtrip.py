"""The mixed cluster's history exported as OpenMetrics, loaded into a real Prometheus through promtool: its DRA
series carry the consumers and the claims with the scenario's values, its HAMi GPUs' series no pod."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from prometheus_api_client import PrometheusConnect

from tests.devtools.conftest import END, MIXED_DAYS
from tests.harness.services import require_binary
from tests.oracle import _SignalCache, allocation_mode

pytestmark = pytest.mark.services
HOURS = 3


def _load(name: str, tmp_path_factory):
    from tests.harness.prometheus import start_prometheus

    require_binary("prometheus")
    require_binary("promtool")
    out = tmp_path_factory.mktemp("om") / f"{name}.om"
    call_command("simulate", "export-openmetrics", "--scenario", name, "--since",
                 (END - timedelta(hours=HOURS)).isoformat(), "--until", END.isoformat(), "--end", END.isoformat(),
                 "--days", str(MIXED_DAYS), "--out", str(out))
    return start_prometheus(out)


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    server = _load("mixed", tmp_path_factory)
    yield PrometheusConnect(url=server.url, disable_ssl=True)
    server.close()


def _expected_dra(sc, a: float, b: float) -> dict:
    """(namespace, pod, UUID, GPU_I_ID, device) -> the time-average of SM_ACTIVE over the pod's held part of [a, b)."""
    cache = _SignalCache(sc, "sm_active")
    out = {}
    for p in sc.pods:
        if allocation_mode(sc, p) != "dra" or not p.units or p.start >= b or p.hold_end <= a:
            continue
        for u in p.units:
            ent = sc.entities[u.entity]
            _claim, device = sc.dra_held[(p.idx, u.entity)]
            key = (p.namespace, p.name, ent.uuid, ent.gi_id or "", device)
            out[key] = cache.average(u.entity, max(a, p.start), min(b, p.hold_end))
    return out


@pytest.mark.parametrize("hours_before_end", [0, 2])
def test_dra_series_answer_per_consumer_and_device_with_the_scenario_values(prom, mixed, hours_before_end):
    at = END - timedelta(hours=hours_before_end)
    rows = prom.custom_query('avg_over_time(DCGM_FI_PROF_SM_ACTIVE{dra_claim_name!=""}[1h])',
                             params={"time": at.timestamp()})
    got = {}
    for r in rows:
        m = r["metric"]
        assert m["dra_claim_namespace"] == m["namespace"] and m["dra_pool_name"] == m["Hostname"]
        got[(m["namespace"], m["pod"], m["UUID"], m.get("GPU_I_ID", ""), m["dra_device_name"])] = float(r["value"][1])
    expected = _expected_dra(mixed, at.timestamp() - 3600, at.timestamp())
    assert set(got) == set(expected) and len(expected) >= 11  # 11 DRA units held in the last hour
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=0.01, abs=0.002), key
    migs = prom.custom_query('DCGM_FI_PROF_SM_ACTIVE{dra_mig_device_uuid!=""}', params={"time": at.timestamp() - 60})
    assert migs and all(r["metric"]["dra_mig_device_uuid"].startswith("MIG-") and r["metric"]["GPU_I_ID"]
                        for r in migs)


def test_hami_gpus_answer_without_pods_with_the_gpu_values(prom, mixed):
    at = END.timestamp()
    rows = prom.custom_query('avg_over_time(DCGM_FI_PROF_SM_ACTIVE{Hostname=~"hami-.*"}[1h])', params={"time": at})
    cache = _SignalCache(mixed, "sm_active")
    by_uuid = {e.uuid: e for e in mixed.entities if mixed.node_by_name[e.node].kind == "hami"}
    assert {r["metric"]["UUID"] for r in rows} == set(by_uuid)
    for r in rows:
        assert "pod" not in r["metric"] and "namespace" not in r["metric"]
        expected = cache.average(by_uuid[r["metric"]["UUID"]].idx, at - 3600, at)
        assert float(r["value"][1]) == pytest.approx(expected, rel=0.01, abs=0.002)


def test_without_attribution_no_series_names_a_claim(tmp_path_factory):
    server = _load("mixed-noattr", tmp_path_factory)
    try:
        pc = PrometheusConnect(url=server.url, disable_ssl=True)
        at = END.timestamp() - 60
        assert pc.custom_query('DCGM_FI_PROF_SM_ACTIVE{dra_claim_name!=""}', params={"time": at}) == []
        on_dra = pc.custom_query('DCGM_FI_PROF_SM_ACTIVE{Hostname=~"dra-.*"}', params={"time": at})
        assert len(on_dra) > 10 and all("pod" not in r["metric"] for r in on_dra)
        attributed = pc.custom_query('DCGM_FI_PROF_SM_ACTIVE{Hostname="dp-h100-0",pod!=""}', params={"time": at})
        assert attributed  # the device plugin's GPUs keep their pods
    finally:
        server.close()
