"""`manage.py demo`: the production collector reads the simulated cluster, and the history is replayed."""

from __future__ import annotations

import io

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


def test_it_refuses_a_period_shorter_than_a_day_or_an_unknown_scenario():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="at least 1"):
        call_command("demo", "--days", "0")
    with pytest.raises(CommandError, match="unknown scenario"):
        call_command("demo", "--scenario", "nope")
