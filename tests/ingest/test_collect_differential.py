"""The ledger collected through the real protocols equals the simulator's brute-force oracle."""

from __future__ import annotations

import hashlib
from collections import defaultdict

import pytest
from django.db.models import Sum

from apps.ingest.services import collect_cluster
from apps.inventory.models import Cluster
from apps.usage.activity import SIGNALS
from apps.usage.models import Bucket, NodeHour, PodHour, UsageDay, UsageHour
from tests.harness.shared_rows import WORLD_FIXTURES
from tests.ingest.conftest import EXPORTED_HOURS, make_cluster
from tests.invariants import ledger_violations

# The demo's day collected once for the tests that read it (tests/harness/shared_rows.py): each test's own writes (a
# broken row, five recollections) are rolled back before the next. (No `django_db` mark: the world opens its transaction
# before `db`.)
WORLD_FIXTURES.add("shared_collected_day")


@pytest.fixture
def shared_collected_day(shared_rows, sim_world):  # type: ignore[no-untyped-def]
    def build():  # type: ignore[no-untyped-def]
        cluster = make_cluster(sim_world)
        return cluster.pk, collect_cluster(cluster, sim_world.hours, now=sim_world.end)

    return shared_rows.world("shared_collected_day", build)


@pytest.fixture
def collected_day(shared_collected_day, db):  # type: ignore[no-untyped-def]
    """(the cluster, freshly read, and the report of collecting the demo's 24 hours)"""
    pk, report = shared_collected_day
    return Cluster.objects.get(pk=pk), report


def ledger_by_team_hour(cluster, signal="sm_active"):
    out = defaultdict(lambda: defaultdict(float))
    for r in PodHour.objects.filter(cluster=cluster):
        d = out[(r.hour, r.team)]
        d["allocated"] += r.allocated_gpu_hours
        d["working"] += getattr(r, f"working_{signal}")
        d["idle"] += getattr(r, f"idle_{signal}")
        d["unmeasured"] += getattr(r, f"unmeasured_{signal}")
    return out


def checksum() -> str:
    h = hashlib.sha256()
    for model in (PodHour, NodeHour, UsageHour, UsageDay):
        fields = [f.attname for f in model._meta.fields if f.attname != "id"]
        for row in model.objects.order_by(*fields).values_list(*fields):
            h.update(repr(row).encode())
    return h.hexdigest()


def test_it_matches_the_oracle_per_team_and_hour(sim_world, collected_day):
    from tests.oracle import expected_ledger

    cluster, report = collected_day
    assert report.ok, report.failed
    assert len(report.written) == 24
    for signal in ("sm_active", "gpu_util"):
        expected = expected_ledger(sim_world.scenario, sim_world.start, sim_world.end, signal=signal).team_hours
        got = ledger_by_team_hour(cluster, signal)
        keys = {k for k, v in expected.items() if v["allocated"] > 0}
        assert keys == {k for k, v in got.items() if v["allocated"] > 0}
        for key in sorted(keys):
            e, g = expected[key], got[key]
            assert g["allocated"] == pytest.approx(e["allocated"], abs=1e-6), (signal, key)
            assert g["unmeasured"] == pytest.approx(e["unmeasured"], abs=1e-6), (signal, key)
            assert g["working"] == pytest.approx(e["working"], rel=0.01, abs=1e-3), (signal, key)


def test_it_holds_every_ledger_invariant_on_every_bucket(sim_world, collected_day):
    cluster, _report = collected_day
    assert Bucket.objects.filter(cluster=cluster, status="ok", state="final").count() == 24
    for r in PodHour.objects.filter(cluster=cluster):
        for s in SIGNALS:
            total = getattr(r, f"working_{s}") + getattr(r, f"idle_{s}") + getattr(r, f"unmeasured_{s}")
            assert abs(r.allocated_gpu_hours - total) < 1e-9, (r.pod, r.hour, s)
    for n in NodeHour.objects.filter(cluster=cluster):
        assert n.allocated_gpu_hours <= n.capacity_gpu_hours + 1e-9, n.node
        assert abs(n.allocated_gpu_hours + n.unallocated_gpu_hours - n.capacity_gpu_hours) < 1e-9, n.node
    # Team totals add up to the cluster total, per hour; rollups agree with the ledger rows.
    for hour in sim_world.hours:
        pods = PodHour.objects.filter(cluster=cluster, hour=hour).aggregate(a=Sum("allocated_gpu_hours"))["a"] or 0
        nodes = NodeHour.objects.filter(cluster=cluster, hour=hour).aggregate(a=Sum("allocated_gpu_hours"))["a"] or 0
        teams = UsageHour.objects.filter(cluster=cluster, hour=hour).aggregate(a=Sum("allocated_gpu_hours"))["a"] or 0
        assert pods == pytest.approx(nodes, abs=1e-9)
        assert teams == pytest.approx(pods, abs=1e-9)
    day_total = UsageDay.objects.filter(cluster=cluster).aggregate(a=Sum("allocated_gpu_hours"))["a"]
    assert day_total == pytest.approx(PodHour.objects.filter(cluster=cluster).aggregate(
        a=Sum("allocated_gpu_hours"))["a"], abs=1e-6)
    # The same invariants as SQL aggregates (what bench/invariants.py runs on a week of `large`) agree.
    assert set(ledger_violations([cluster.pk]).values()) == {0}
    # ...and they see a broken row: one pod-hour whose parts do not add up, one day rollup off by an hour.
    from django.db.models import F

    row = PodHour.objects.filter(cluster=cluster, allocated_gpu_hours__gt=0).first()
    PodHour.objects.filter(pk=row.pk).update(idle_sm_active=F("idle_sm_active") + 0.5)
    UsageDay.objects.filter(pk=UsageDay.objects.filter(cluster=cluster).first().pk).update(
        allocated_gpu_hours=F("allocated_gpu_hours") + 1)
    broken = {k: v for k, v in ledger_violations([cluster.pk]).items() if v}
    assert broken == {"pod allocated = working + idle + unmeasured (sm_active)": 1,
                      "day rollup = sum of its hours": 1}


def test_it_converges_when_recollected_five_times(sim_world, collected_day):
    cluster, _report = collected_day
    first = checksum()
    assert PodHour.objects.exists()
    for _ in range(5):
        collect_cluster(cluster, sim_world.hours[:6], now=sim_world.end)
        assert checksum() == first


def test_it_gives_the_same_ledger_for_both_label_variants(sim_world, sim_world_exported, db):
    a = make_cluster(sim_world, name="plain")
    b = make_cluster(sim_world_exported, name="exported")
    assert collect_cluster(a, sim_world.hours[-EXPORTED_HOURS:], now=sim_world.end).ok
    assert collect_cluster(b, sim_world_exported.hours, now=sim_world_exported.end).ok  # the same hours
    ga, gb = ledger_by_team_hour(a), ledger_by_team_hour(b)
    assert ga.keys() == gb.keys() and ga
    for key in ga:
        for col in ("allocated", "working", "idle", "unmeasured"):
            assert ga[key][col] == pytest.approx(gb[key][col], abs=1e-9), (key, col)
