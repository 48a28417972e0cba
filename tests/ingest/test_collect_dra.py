"""GPUs handed out by DRA claims and HAMi fractions, collected through the real protocols (the simulator's
Kubernetes API over HTTP, a real Prometheus backfilled with its history), equal the oracle's truth.

Claims made from templates are deleted with their pods and the API keeps no allocation history, so the cluster is
read as the collector reads it in production: every 5 minutes, each hour's bucket collected once its hour ended.
`mixed` and `mixed-noattr` are collected once for these tests and tests/findings/test_mixed_findings.py
(tests/ingest/conftest.py, `mixed_collection`).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

import pytest

from apps.inventory.models import Node
from apps.usage.activity import SIGNALS
from apps.usage.models import Bucket, NodeHour, PodHour
from tests.ingest.conftest import MIXED_HOURS, collect_every_five_minutes, make_cluster, mixed_world
from tests.invariants import ledger_violations

# No `django_db` mark: the shared collection opens its transaction before `db` (tests/harness/shared_rows.py).
pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def mixed_v1beta1(tmp_path_factory, django_db_setup, django_db_blocker):
    yield from mixed_world(tmp_path_factory, "mixed-v1beta1")


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


def _check_against_oracle(world, cluster, hours):
    from tests.oracle import expected_ledger

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


def test_mixed_cluster_matches_the_oracle_per_team_workload_and_node(mixed_collection):
    mixed = mixed_collection["mixed"]
    cluster = mixed.cluster
    _check_against_oracle(mixed.world, cluster, mixed.hours)
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


def test_mixed_cluster_served_as_v1beta1_matches_the_oracle(mixed_v1beta1, db):
    cluster = make_cluster(mixed_v1beta1, name="sim-mixed-beta")
    hours = mixed_v1beta1.hours[-MIXED_HOURS:]
    collect_every_five_minutes(cluster, mixed_v1beta1, hours)
    _check_against_oracle(mixed_v1beta1, cluster, hours)


def test_dra_nodes_without_the_exporters_dra_attribution_are_unmeasured_and_named(mixed_collection):
    noattr = mixed_collection["noattr"]
    cluster = noattr.cluster
    _check_against_oracle(noattr.world, cluster, noattr.hours)
    assert set().union(*(r.unattributed_dra_nodes for r in noattr.results)) == {"dra-h100-0", "dra-h100-1", "dra-mig-0"}
    dra = PodHour.objects.filter(cluster=cluster, allocation_mode="dra").exclude(pod="")
    assert dra.exists() and all(r.unmeasured_sm_active == pytest.approx(r.allocated_gpu_hours) for r in dra)
