"""Recording rules (deploy/monitoring/gpufinops-recording.yaml): the collector reads their series when they cover a
bucket and the raw series when they do not, with the same ledger and findings either way (issue 24)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from apps.findings.models import FindingHour
from apps.ingest.collectors.prometheus import PrometheusSource
from apps.ingest.collectors.promql import HEALTH_RECORDED, RECORDED_SIGNALS
from apps.ingest.services import collect_cluster
from apps.inventory.models import Cluster
from apps.savings.models import PodMemoryHour
from apps.usage.models import NodeHour, PodHour
from tests.ingest.conftest import make_cluster

pytestmark = pytest.mark.django_db


def rows(cluster: Cluster) -> dict[str, list[tuple]]:
    """Every pod-hour, node-hour, finding and pod framebuffer (savings) row of the cluster, without ids and the
    cluster."""
    out = {}
    for model in (PodHour, NodeHour, FindingHour, PodMemoryHour):
        fields = [f.attname for f in model._meta.fields if f.attname not in ("id", "cluster_id")]
        out[model.__name__] = sorted(model.objects.filter(cluster=cluster).values_list(*fields), key=repr)
    return out


def test_the_ledger_and_findings_are_the_same_with_and_without_the_recorded_series(sim_world_recorded, settings):
    world = sim_world_recorded
    hours = world.hours[-6:]
    collected = {}
    for on in (True, False):
        settings.GPUFINOPS_PROMETHEUS_RECORDING_RULES = on
        cluster = make_cluster(world, name=f"recorded-{on}")
        report = collect_cluster(cluster, hours, now=world.end)
        assert report.ok and not report.findings_failed, (report.failed, report.findings_failed)
        collected[on] = (cluster, report)
    (with_rules, with_report), (raw, raw_report) = collected[True], collected[False]
    got, expected = rows(with_rules), rows(raw)
    assert all(expected.values())
    for table in expected:
        assert got[table] == expected[table], table
    # The recorded series were read: one round of three queries per bucket instead of the four signals' and the
    # framebuffer's queries.
    assert with_report.queries < raw_report.queries


def test_the_recorded_series_cover_a_bucket_of_the_world_that_has_them(sim_world_recorded, sim_world, settings):
    settings.GPUFINOPS_PROMETHEUS_RECORDING_RULES = True
    hour = sim_world_recorded.hours[-1]
    recorded = PrometheusSource(make_cluster(sim_world_recorded, name="has-rules")).recorded(
        hour, hour + timedelta(hours=1))
    assert recorded is not None and set(recorded) == set(RECORDED_SIGNALS)
    # Without the rules, without the setting, or with a renamed signal metric: the raw series.
    assert PrometheusSource(make_cluster(sim_world, name="no-rules")).recorded(hour, hour + timedelta(hours=1)) is None
    renamed = make_cluster(sim_world_recorded, name="renamed", metric_names={"sm_active": "DCGM_FI_PROF_SM_OCCUPANCY"})
    assert PrometheusSource(renamed).recorded(hour, hour + timedelta(hours=1)) is None
    settings.GPUFINOPS_PROMETHEUS_RECORDING_RULES = False
    off = make_cluster(sim_world_recorded, name="setting-off")
    assert PrometheusSource(off).recorded(hour, hour + timedelta(hours=1)) is None


def test_the_health_fields_are_the_same_from_the_recorded_series(sim_world_recorded, settings):
    """Every hour of the demo's last day: the findings' health fields per GPU read through the recorded health
    series equal those read from the raw series, and the recorded series were the ones asked."""
    world = sim_world_recorded
    cluster = make_cluster(world, name="health-recorded")
    seen: dict[str, int] = {}
    for hour in world.hours[-24:]:
        end = hour + timedelta(hours=1)
        health = {}
        for on in (True, False):
            settings.GPUFINOPS_PROMETHEUS_RECORDING_RULES = on
            source = PrometheusSource(cluster)
            asked: list[str] = []
            ask = source.ask
            source.ask = lambda promql, at, ask=ask, asked=asked: asked.append(promql) or ask(promql, at)
            health[on] = source.device_health(hour, end)
            assert source.rules_cover(hour, end) is on
            assert any(HEALTH_RECORDED in q for q in asked) is on
        assert health[True] == health[False], hour
        for h in health[True]:
            for name, value in (("xid", h.xid_codes), ("clock", h.clock_events), ("power", h.power_violation_seconds),
                                ("thermal", h.thermal_violation_seconds), ("remapped", h.uncorrectable_remapped_rows),
                                ("remap_failure", h.row_remap_failure), ("dbe", h.ecc_dbe)):
                seen[name] = seen.get(name, 0) + bool(value)
    # The comparison covered the recorded fields, not only empty answers.
    assert seen.get("xid") and seen.get("clock") and (seen.get("power") or seen.get("thermal")), seen


@pytest.mark.parametrize("rules", [True, False], ids=["recorded", "raw"])
def test_the_round_asks_the_last_xid_codes_right_after_the_highest(sim_world_recorded, settings, rules):
    """From the recorded health round or the raw one, `prefetch`'s round asks the last XID codes of the GPUs with a
    code (only those) as soon as it has their highest: device_health then asks nothing of its own for them, and reads
    the same fields."""
    settings.GPUFINOPS_PROMETHEUS_RECORDING_RULES = rules
    cluster = make_cluster(sim_world_recorded, name=f"xid-in-the-round-{rules}")
    for hour in reversed(sim_world_recorded.hours[-24:]):
        end = hour + timedelta(hours=1)
        in_place = PrometheusSource(cluster).device_health(hour, end)
        if any(h.xid_codes for h in in_place):
            break
    else:
        pytest.fail("no hour of the demo's last day has an XID code")
    source = PrometheusSource(cluster)
    in_round: list[str] = []
    ask = source.ask
    source.ask = lambda promql, at: in_round.append(promql) or ask(promql, at)
    source.prefetch(hour, end)
    asked: list[str] = []
    source.ask = lambda promql, at: asked.append(promql) or ask(promql, at)
    assert source.device_health(hour, end) == in_place
    assert not [q for q in asked if "last_over_time(DCGM_FI_DEV_XID" in q], asked
    # Asked once, in the round, of the GPUs with a code only (a matcher naming them).
    last = [q for q in in_round if "last_over_time(DCGM_FI_DEV_XID" in q]
    assert len(last) == 1 and "uuid=~" in last[0].lower(), last


@pytest.mark.parametrize("cut", ["start", "end"])
def test_recorded_series_that_start_or_stop_within_the_bucket_are_not_used(cut, settings):
    """Rules installed (or removed) ten minutes into the hour: the bucket reads the raw series."""
    from devtools.simulator.prometheus_api import start_prometheus
    from devtools.simulator.scenarios import build_scenario

    settings.GPUFINOPS_PROMETHEUS_RECORDING_RULES = True
    sc = build_scenario("demo", seed=0, days=1, with_dra=False)
    sc.recording_rules = True
    hour = sc.end - timedelta(hours=2)
    end = hour + timedelta(hours=1)
    whole = start_prometheus(sc, step=30)
    window = {"since": (hour + timedelta(minutes=10)).timestamp()} if cut == "start" else {
        "until": (end - timedelta(minutes=10)).timestamp()}
    partial = start_prometheus(sc, step=30, **window)
    try:
        full = PrometheusSource(Cluster.objects.create(name="whole", prometheus_url=whole.url)).recorded(hour, end)
        assert full is not None and full["sm_active"]
        partial_source = PrometheusSource(Cluster.objects.create(name="partial", prometheus_url=partial.url))
        assert partial_source.recorded(hour, end) is None
        # The findings' health fields too are read raw there: the same as with the setting off.
        assert not partial_source.rules_cover(hour, end)
        health = partial_source.device_health(hour, end)
        settings.GPUFINOPS_PROMETHEUS_RECORDING_RULES = False
        assert health == PrometheusSource(Cluster.objects.get(name="partial")).device_health(hour, end)
    finally:
        whole.stop()
        partial.stop()
