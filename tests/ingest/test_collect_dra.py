"""GPUs handed out by DRA claims and HAMi fractions, collected through the real protocols (the simulator's
Kubernetes API over HTTP, a real Prometheus backfilled with its history), equal the oracle's truth.

Claims made from templates are deleted with their pods and the API keeps no allocation history, so the cluster is
read as the collector reads it in production: every 5 minutes, each hour's bucket collected once its hour ended.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from datetime import timedelta

import pytest

from apps.ingest.collectors.kubernetes import read_snapshot
from apps.ingest.collectors.prometheus import PrometheusSource
from apps.ingest.services import record_findings, record_snapshot
from apps.inventory.models import Node
from apps.usage import services as ledger
from apps.usage.activity import SIGNALS
from apps.usage.models import Bucket, NodeHour, PodHour
from tests.ingest.conftest import make_cluster, mixed_world
from tests.invariants import ledger_violations

pytestmark = [pytest.mark.django_db, pytest.mark.services]

HOURS = 12  # the last hours of the window: every DRA and HAMi case of `mixed` happens in them
SNAPSHOT = timedelta(minutes=5)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory, django_db_setup, django_db_blocker):
    yield from mixed_world(tmp_path_factory, "mixed")


@pytest.fixture(scope="module")
def mixed_noattr(tmp_path_factory, django_db_setup, django_db_blocker):
    yield from mixed_world(tmp_path_factory, "mixed-noattr")


@pytest.fixture(scope="module")
def mixed_v1beta1(tmp_path_factory, django_db_setup, django_db_blocker):
    yield from mixed_world(tmp_path_factory, "mixed-v1beta1")


def collect_hour_by_hour(cluster, world, hours):
    """Snapshots every 5 minutes through each hour, then the hour's bucket, as beat drives the collector."""
    source = PrometheusSource(cluster)
    at = hours[0]
    results = []
    for hour in hours:
        snap = None
        while at <= hour + timedelta(hours=1):
            world.server.set_time(at)
            snap = dataclasses.replace(read_snapshot(cluster), taken_at=at)
            record_snapshot(cluster, snap)
            at += SNAPSHOT
        at -= SNAPSHOT  # the hour's last read is the next hour's first
        outcome = ledger.collect_bucket(cluster, hour, now=world.end, source=source,
                                        namespace_labels=snap.namespace_labels, owner="test")
        assert outcome.state == "written", outcome.error
        assert record_findings(cluster, hour, outcome, source) == ""  # findings read DRA and HAMi rows too
        results.append(outcome.result)
    world.server.set_time(world.end)
    return results


def _sums(rows, key):
    out = defaultdict(lambda: defaultdict(float))
    for r in rows:
        d = out[key(r)]
        for k in ("allocated", "working", "idle", "unmeasured"):
            d[k] += r[k]
    return out


def _got(cluster, signal):
    return [{"hour": r.hour, "team": r.team, "namespace": r.namespace, "workload": r.workload, "node": r.node,
             "mode": r.allocation_mode, "allocated": r.allocated_gpu_hours,
             "working": getattr(r, f"working_{signal}"), "idle": getattr(r, f"idle_{signal}"),
             "unmeasured": getattr(r, f"unmeasured_{signal}")} for r in PodHour.objects.filter(cluster=cluster)]


def _compare(expected, got, what):
    keys = {k for k, v in expected.items() if v["allocated"] > 1e-9}
    assert keys == {k for k, v in got.items() if v["allocated"] > 1e-9}, what
    for key in sorted(keys, key=str):
        e, g = expected[key], got[key]
        for col in ("allocated", "unmeasured"):
            assert g[col] == pytest.approx(e[col], abs=1e-6), (what, key, col)
        assert g["working"] == pytest.approx(e["working"], rel=0.01, abs=1e-3), (what, key)


def _check_against_oracle(world, cluster):
    from tests.oracle import expected_ledger

    hours = world.hours[-HOURS:]
    results = collect_hour_by_hour(cluster, world, hours)
    start, end = hours[0], hours[-1] + timedelta(hours=1)
    for signal in ("sm_active", "gpu_util"):
        led = expected_ledger(world.scenario, start, end, signal=signal)
        got = _got(cluster, signal)
        for what, key in (("team", lambda r: (r["hour"], r["team"])),
                          ("workload", lambda r: (r["hour"], r["team"], r["namespace"], r["workload"])),
                          ("node", lambda r: (r["hour"], r["node"]))):
            _compare(_sums(led.rows, key), _sums(got, key), what)
        modes = {(r["hour"], r["namespace"], r["workload"]): r["allocation_mode"] for r in led.rows}
        for r in got:
            assert r["mode"] == modes[(r["hour"], r["namespace"], r["workload"])], r
    nodes = {(h, n): v for (h, n), v in expected_ledger(world.scenario, start, end).node_hours.items()}
    for row in NodeHour.objects.filter(cluster=cluster):
        e = nodes[(row.hour, row.node)]
        assert row.capacity_gpu_hours == pytest.approx(e["capacity"], abs=1e-6), row.node
        assert row.allocated_gpu_hours == pytest.approx(e["allocated"], abs=1e-6), (row.hour, row.node)
    assert Bucket.objects.filter(cluster=cluster, inconsistent=True).count() == 0
    assert set(ledger_violations([cluster.pk]).values()) == {0}
    for r in PodHour.objects.filter(cluster=cluster):
        for s in SIGNALS:
            total = getattr(r, f"working_{s}") + getattr(r, f"idle_{s}") + getattr(r, f"unmeasured_{s}")
            assert r.allocated_gpu_hours == pytest.approx(total, abs=1e-9)
    return results


def test_mixed_cluster_matches_the_oracle_per_team_workload_and_node(mixed):
    cluster = make_cluster(mixed, name="sim-mixed")
    _check_against_oracle(mixed, cluster)
    sharing = dict(Node.objects.filter(cluster=cluster).values_list("name", "sharing"))
    assert sharing["dra-mig-0"] == "dra" and sharing["hami-a100-0"] == "hami"
    modes = set(PodHour.objects.filter(cluster=cluster).values_list("allocation_mode", flat=True))
    assert modes == {"device_plugin", "time_slice", "mig", "dra", "hami"}
    # The cases are there: a claim's idle hours with no consumer, a claim shared by two teams' pods.
    idle = PodHour.objects.filter(cluster=cluster, workload="ResourceClaim/reserved-h100-pair", pod="")
    assert idle.count() >= 5 and all(r.idle_sm_active == r.allocated_gpu_hours > 0 for r in idle)
    shared = PodHour.objects.filter(cluster=cluster, node="dra-h100-0", namespace="inference", gpus__lt=0.99,
                                    allocation_mode="dra")
    assert {r.team for r in shared} == {"serving", "research"}


def test_mixed_cluster_served_as_v1beta1_matches_the_oracle(mixed_v1beta1):
    cluster = make_cluster(mixed_v1beta1, name="sim-mixed-beta")
    _check_against_oracle(mixed_v1beta1, cluster)


def test_dra_nodes_without_the_exporters_dra_attribution_are_unmeasured_and_named(mixed_noattr):
    cluster = make_cluster(mixed_noattr, name="sim-mixed-noattr")
    results = _check_against_oracle(mixed_noattr, cluster)
    assert set().union(*(r.unattributed_dra_nodes for r in results)) == {"dra-h100-0", "dra-h100-1", "dra-mig-0"}
    dra = PodHour.objects.filter(cluster=cluster, allocation_mode="dra").exclude(pod="")
    assert dra.exists() and all(r.unmeasured_sm_active == pytest.approx(r.allocated_gpu_hours) for r in dra)
