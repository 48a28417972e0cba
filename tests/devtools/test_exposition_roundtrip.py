"""History exported as OpenMetrics, loaded into a real Prometheus, answers like the scenario."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from prometheus_api_client import PrometheusConnect

from tests.harness.services import require_binary
from tests.oracle import _SignalCache

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def prom(demo, tmp_path_factory):
    from tests.harness.prometheus import start_prometheus

    # Skips locally, fails in CI (GPUFINOPS_REQUIRE_SERVICES=1) when Prometheus is not installed.
    require_binary("prometheus")
    require_binary("promtool")

    out = tmp_path_factory.mktemp("om") / "demo.om"
    since = demo.end - timedelta(hours=3)
    call_command(
        "simulate",
        "export-openmetrics",
        "--scenario",
        "demo",
        "--seed",
        "0",
        "--since",
        since.isoformat(),
        "--until",
        demo.end.isoformat(),
        "--out",
        str(out),
        "--no-with-dra",  # the `demo` fixture's cases
    )
    assert out.read_text()[-6:] == "# EOF\n"
    server = start_prometheus(out)
    yield server
    server.close()


def _expected_unit_averages(sc, a, b):
    """(namespace, pod, UUID, GPU_I_ID) -> exact time-average of SM_ACTIVE over the held part of [a, b)."""
    cache = _SignalCache(sc, "sm_active")
    out = {}
    for p in sc.pods:
        if p.start is None or not p.units or p.start >= b or p.hold_end <= a:
            continue
        lo, hi = max(a, p.start), min(b, p.hold_end)
        for u in p.units:
            ent = sc.entities[u.entity]
            if u.ghost or ent.labels_lost:
                continue
            out[(p.namespace, p.name, ent.uuid, ent.gi_id or "")] = cache.average(u.entity, lo, hi)
    return out


@pytest.mark.parametrize("hours_before_end", [0, 1, 2])
def test_it_answers_avg_over_time_per_pod_with_the_scenario_values(prom, demo, hours_before_end):
    at = demo.end - timedelta(hours=hours_before_end)
    pc = PrometheusConnect(url=prom.url, disable_ssl=True)
    rows = pc.custom_query('avg_over_time(DCGM_FI_PROF_SM_ACTIVE{pod!=""}[1h])', params={"time": at.timestamp()})
    got = {}
    for r in rows:
        m = r["metric"]
        key = (m["namespace"], m["pod"], m["UUID"], m.get("GPU_I_ID", ""))
        got[key] = float(r["value"][1])
    # time-sliced tenants repeat the device value: one series per tenant, same key shape
    expected = _expected_unit_averages(demo, at.timestamp() - 3600, at.timestamp())
    assert set(got) == set(expected)
    assert len(expected) > 40
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=0.01, abs=0.002), key


def test_it_carries_kube_state_metrics_for_the_same_pods(prom, demo):
    pc = PrometheusConnect(url=prom.url, disable_ssl=True)
    at = demo.end.timestamp() - 60
    starts = pc.custom_query("kube_pod_start_time", params={"time": at})
    running = {(p.namespace, p.name): p.start for p in demo.pods if p.held(at)}
    got = {(r["metric"]["namespace"], r["metric"]["pod"]): float(r["value"][1]) for r in starts}
    for key, start in running.items():
        assert got[key] == start
    gpus = pc.custom_query('sum(kube_node_status_allocatable{resource="nvidia_com_gpu"})', params={"time": at})
    assert float(gpus[0]["value"][1]) == 8 * 4 + 8 + 4 + 4 + 16  # h100-train, a100-0, a100-mig-0 whole, l4-0, l4-ts-0
    req = pc.custom_query(
        'sum by (namespace, pod) (kube_pod_container_resource_requests{resource="nvidia_com_gpu", node=""})',
        params={"time": at},
    )
    assert {r["metric"]["pod"] for r in req} == {p.name for p in demo.pods if p.visible(at) and p.start is None}
    team = pc.custom_query('kube_pod_labels{label_team="vision"}', params={"time": at})
    assert [r["metric"]["pod"] for r in team] == ["jupyter-carol-0"]


def test_an_export_written_per_window_makes_the_blocks_of_the_whole_export(demo, tmp_path):
    """`--window-seconds` (how the test worlds' histories are written: no split pass before promtool,
    tests/harness/backfill.py) writes the whole export's samples, in its order, one complete file per promtool block
    window: promtool makes the blocks (time ranges, samples, series, chunks) it makes of the whole export."""
    import subprocess

    from tests.harness.backfill import WINDOW_SECONDS, backfill, block_listing

    promtool = require_binary("promtool")
    since, until = demo.end - timedelta(hours=5, minutes=30), demo.end  # mid-window: the first window is partial
    argv = ["simulate", "export-openmetrics", "--scenario", "tiny", "--since", since.isoformat(), "--until",
            until.isoformat(), "--end", demo.end.isoformat(), "--days", "1", "--step", "60"]
    whole, windows = tmp_path / "whole.om", tmp_path / "windows"
    call_command(*argv, "--out", str(whole))
    call_command(*argv, "--out", str(windows), "--window-seconds", str(WINDOW_SECONDS))

    def window(sample: str) -> int:
        return int(sample.rsplit(" ", 1)[1]) // WINDOW_SECONDS

    first, last = int(since.timestamp()) // WINDOW_SECONDS, (int(until.timestamp()) - 1) // WINDOW_SECONDS
    assert last - first == 2
    files = [windows / f"window-{w}.om" for w in range(first, last + 1)]
    assert sorted(windows.iterdir()) == files
    samples = [line for line in whole.read_text().splitlines() if not line.startswith("#")]
    for w, path in zip(range(first, last + 1), files, strict=True):
        text = path.read_text()
        lines = [line for line in text.splitlines() if not line.startswith("#")]
        assert lines == [line for line in samples if window(line) == w]  # the whole export's, in its order
        assert text.endswith("# EOF\n") and text.count("# EOF") == 1
        families = {line.split("{", 1)[0] for line in lines}
        assert len(families) > 10 and all(text.count(f"# TYPE {f} gauge\n") == 1 for f in families)

    unsplit, split = tmp_path / "unsplit", tmp_path / "split"
    subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(whole), str(unsplit)], check=True)
    split.mkdir()
    backfill(promtool, windows, split, timeout=120)
    assert block_listing(promtool, split) == block_listing(promtool, unsplit)
    assert sum(int(row[2]) for row in block_listing(promtool, split)) == len(samples)  # every sample, once
