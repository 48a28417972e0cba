"""`manage.py demo`: the production collector reads the simulated cluster, and the history is replayed."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from apps.capacity.models import CapacityCollection
from apps.inventory.models import Cluster, GpuPrice
from apps.queues.models import QueueCollection
from apps.usage.models import Bucket, PodHour


@pytest.fixture
def demo_run(transactional_db, settings, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    settings.VAR_DIR = tmp_path
    for name in ("NO_PROXY", "no_proxy"):  # the command sets them for its loopback servers
        monkeypatch.delenv(name, raising=False)
    out = io.StringIO()
    call_command("demo", "--days", "1", stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.mark.slow
def test_it_collects_a_day_through_the_production_path(demo_run):
    cluster = Cluster.objects.get(name="sim-demo")
    assert cluster.prometheus_url.startswith("http://127.0.0.1:")  # the simulated Prometheus, like any other
    assert cluster.kubeconfig_path.endswith("sim-demo.kubeconfig")
    buckets = Bucket.objects.filter(cluster=cluster)
    assert buckets.count() in (24, 25) and all(b.status == Bucket.Status.OK for b in buckets)
    assert PodHour.objects.filter(cluster=cluster).count() > 24 * 30
    assert GpuPrice.objects.filter(gpu_model="NVIDIA-H100-80GB-HBM3").exists()
    # the capacity and queue history: one snapshot per hour, plus the collection's own
    assert CapacityCollection.objects.filter(cluster=cluster).count() >= 24
    assert QueueCollection.objects.filter(cluster=cluster).count() >= 24
    assert "0 failed" in demo_run and "Prometheus queries" in demo_run
    assert get_user_model().objects.filter(username="demo", is_staff=True).exists()
    assert "as demo / " in demo_run
    # The finance pages have something to show: the cloud bill matched to the nodes, and weekly budgets.
    from apps.billing.selectors import reconciliation
    from apps.budgets.models import Budget

    month = reconciliation(f"{Bucket.objects.filter(cluster=cluster).latest('hour').hour:%Y-%m}")
    (sim,) = month.clusters
    assert sim.billed_cost > 0 and sim.price_card_cost > 0
    assert [n.node for n in sim.nodes_without_bill] == ["l4-noplugin-0"]
    assert [u.resource_id for u in month.unmatched] == ["i-0ffffffffffffffff"]
    assert Budget.objects.filter(period="weekly").count() >= 3 and "(/budgets/)" in demo_run


# A Monday 01:30 UTC: the default period is the previous ISO week (2026-W48, 168 hours) and the current week's first
# two hours, so W48 is final. The tiny scenario (3 nodes) keeps a week of collection short.
MONDAY = datetime(2026, 11, 30, 1, 30, tzinfo=UTC)


@pytest.mark.slow
def test_the_default_period_leaves_a_final_a_provisional_and_a_restated_weekly_report(
        transactional_db, settings, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    from apps.reports.archive import page
    from apps.reports.periods import period_state, week

    settings.VAR_DIR = tmp_path
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    out = io.StringIO()
    call_command("demo", "--scenario", "tiny", "--now", MONDAY.isoformat(), stdout=out, stderr=io.StringIO())
    hours = Bucket.objects.order_by("hour").values_list("hour", flat=True)
    assert hours[0] == datetime(2026, 11, 23, tzinfo=UTC) and len(hours) == 7 * 24 + 2  # from W48's Monday 00:00
    assert period_state(week(hours[0]), MONDAY).final
    archive = page(get_user_model().objects.get(username="demo"), None, now=MONDAY)
    editions = [(e["period"], e["status"], e["version"]) for e in archive["editions"]]
    assert editions == [("2026-W49", "provisional", 1), ("2026-W48", "restated", 2), ("2026-W48", "final", 1)]
    restated = next(e for e in archive["editions"] if e["status"] == "restated")
    assert restated["previous_version"] == 1
    assert not [d for d in archive["due"] if d["kind"] == "weekly"]  # the last complete week has its final edition
    assert "2026-W48 all v1 final" in out.getvalue() and "2026-W48 all v2 restated" in out.getvalue()


def test_the_default_period_starts_on_the_previous_iso_weeks_monday():
    from devtools.management.commands.demo import demo_since

    assert demo_since(MONDAY, None) == datetime(2026, 11, 23, tzinfo=UTC)
    sunday = datetime(2026, 12, 6, 23, 59, tzinfo=UTC)
    assert demo_since(sunday, None) == datetime(2026, 11, 23, tzinfo=UTC)
    assert demo_since(MONDAY, 2) == MONDAY - timedelta(days=2)


def test_it_refuses_a_period_shorter_than_a_day_or_an_unknown_scenario():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="at least 1"):
        call_command("demo", "--days", "0")
    with pytest.raises(CommandError, match="unknown scenario"):
        call_command("demo", "--scenario", "nope")
