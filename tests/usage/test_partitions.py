"""Monthly partitions of the pod- and node-hour tables (apps/usage/partitions.py) and ledger retention."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection

from apps.common.timeutils import month_start, next_month
from apps.inventory.gpus import GpuNode
from apps.inventory.models import Cluster
from apps.usage import partitions
from apps.usage import services as ledger
from apps.usage.activity import SIGNALS
from apps.usage.ledger import BucketInputs, NodeFact, PodFact, SeriesFact, compute_bucket
from apps.usage.models import NodeHour, PodHour, UsageDay
from apps.usage.selectors import usage_report


def _write(cluster: Cluster, hour: datetime) -> None:
    node = NodeFact("n1", "pool", GpuNode("NVIDIA-H100-80GB-HBM3", 8, "none", 7), 3600.0, False, Decimal("4"))
    pod = PodFact(f"uid-{hour:%m%d%H}", "ml", "train", "n1", "vision", {"nvidia.com/gpu": 2}, 3600.0)
    series = [SeriesFact("ml", "train", f"GPU-{i}", "", "", dict.fromkeys(SIGNALS, 0.5)) for i in range(2)]
    assert ledger.claim_bucket(cluster, hour, "t")
    ledger.write_bucket(cluster, hour, compute_bucket(BucketInputs(hour, 3600, [node], [pod], series)), owner="t",
                        covered_until=hour + timedelta(hours=1))


def _partition_of(model, pk: int) -> str:
    with connection.cursor() as cur:
        cur.execute(f"SELECT tableoid::regclass::text FROM {model._meta.db_table} WHERE id = %s", [pk])
        return cur.fetchone()[0]


@pytest.mark.services
@pytest.mark.django_db
def test_pod_and_node_rows_live_in_their_months_partition(postgres_db):
    for table in partitions.PARTITIONED:
        assert partitions.is_partitioned(connection, table)
    months = {m for _, m in partitions.partitions(connection, "usage_podhour")}
    this_month = month_start(datetime.now(UTC))
    assert {this_month, next_month(this_month)} <= months  # created ahead
    cluster = Cluster.objects.create(name="parts")
    hour = this_month + timedelta(hours=5)
    _write(cluster, hour)
    assert _partition_of(PodHour, PodHour.objects.get().pk) == f"usage_podhour_p{hour:%Y_%m}"
    assert _partition_of(NodeHour, NodeHour.objects.get().pk) == f"usage_nodehour_p{hour:%Y_%m}"


@pytest.mark.services
@pytest.mark.django_db
def test_a_month_not_created_yet_lands_in_default_and_moves_when_created(postgres_db):
    cluster = Cluster.objects.create(name="far")
    far = month_start(datetime.now(UTC))
    for _ in range(8):
        far = next_month(far)
    _write(cluster, far + timedelta(hours=1))
    assert _partition_of(PodHour, PodHour.objects.get().pk) == "usage_podhour_default"
    created = partitions.ensure_partitions(months_ahead=9)
    assert f"usage_podhour_p{far:%Y_%m}" in created
    assert _partition_of(PodHour, PodHour.objects.get().pk) == f"usage_podhour_p{far:%Y_%m}"
    assert PodHour.objects.count() == 1  # moved, not copied


@pytest.mark.django_db
def test_retention_drops_old_months_of_pod_rows_and_keeps_the_rollups():
    """PostgreSQL drops the old month's partitions; SQLite (plain tables) deletes the rows: either way the
    pod rows go and the totals of the old period, read from the rollups, do not change."""
    cluster = Cluster.objects.create(name="old")
    now = datetime.now(UTC)
    old = month_start(month_start(now) - timedelta(days=40)) + timedelta(days=2)  # two months back
    partitions.ensure_partitions(since=old)
    _write(cluster, old)
    _write(cluster, month_start(now) + timedelta(hours=1))
    before = usage_report(start=old.replace(hour=0), end=old.replace(hour=0) + timedelta(days=1),
                          group_by=["team"], visible_teams=None)
    assert ledger.prune_ledger(keep_months=1, now=now) >= 2  # two partitions, or one pod row and one node row
    assert not PodHour.objects.filter(hour=old).exists() and PodHour.objects.exists()
    assert UsageDay.objects.filter(day=old.date()).exists()
    after = usage_report(start=old.replace(hour=0), end=old.replace(hour=0) + timedelta(days=1),
                         group_by=["team"], visible_teams=None)
    assert after.totals == before.totals and after.totals.cost == Decimal("8")
