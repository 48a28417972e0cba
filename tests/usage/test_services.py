"""The ledger's write path (apps/usage/services.py): unique keys, per-cluster serialization, exact money,
source-loss protection, capped backoff and abandonment, and what is due for collection."""

from __future__ import annotations

import math
import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection, connections
from django.db.models import Sum

from apps.inventory.gpus import GpuNode
from apps.inventory.models import Cluster
from apps.usage import services as ledger
from apps.usage.activity import SIGNALS
from apps.usage.ledger import BucketInputs, NodeFact, PodFact, SeriesFact, compute_bucket
from apps.usage.models import Bucket, CapacityDay, CapacityHour, NodeHour, PodHour, UsageDay, UsageHour
from apps.usage.selectors import due_hours

DAY = datetime(2026, 11, 23, tzinfo=UTC)


def _node(price: str | None = "2.50") -> NodeFact:
    return NodeFact("n1", "pool", GpuNode("NVIDIA-H100-80GB-HBM3", 8, "none", 7), 3600.0, False,
                    Decimal(price) if price else None)


def _result(hour: datetime, *, gpus: int = 3, activity: float = 0.5, price: str | None = "2.50", series: bool = True):
    pods = [PodFact(f"uid-{hour:%H}", "ml", f"train-{hour:%H}", "n1", "vision", {"nvidia.com/gpu": gpus}, 3600.0)]
    facts = [SeriesFact("ml", f"train-{hour:%H}", f"GPU-{i}", "", "", dict.fromkeys(SIGNALS, activity))
             for i in range(gpus)] if series else []  # fmt: skip
    return compute_bucket(BucketInputs(hour, 3600, [_node(price)], pods, facts))


def _write(cluster: Cluster, hour: datetime, result, **kwargs) -> str:
    assert ledger.claim_bucket(cluster, hour, "test")
    return ledger.write_bucket(cluster, hour, result, owner="test", covered_until=hour + timedelta(hours=1), **kwargs)


def _day_sums(cluster: Cluster) -> tuple:
    sums = {"a": Sum("allocated_gpu_hours"), "c": Sum("cost")}
    day = UsageDay.objects.filter(cluster=cluster, day=DAY.date()).aggregate(**sums)
    hours = UsageHour.objects.filter(cluster=cluster).aggregate(**sums)
    return (day["a"], day["c"]), (hours["a"], hours["c"])


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_two_writers_of_one_day_never_double_it(postgres_db, monkeypatch):
    """Writer A stops between deleting and re-inserting the day's rollups and waits for writer B to get there
    too: without the cluster lock B would, and each would miss the other's hour (the day doubled). With it,
    B waits for A's commit, never reaches the hook while A is inside, and the day is the sum of its hours."""
    cluster = Cluster.objects.create(name="race")
    hours = [DAY + timedelta(hours=1), DAY + timedelta(hours=2)]
    _write(cluster, DAY, _result(DAY))  # the day exists before the race
    inside: dict[str, threading.Event] = {"A": threading.Event(), "B": threading.Event()}
    seen_together: list[bool] = []

    def hook(_cluster: Cluster, _day) -> None:
        me = threading.current_thread().name
        inside[me].set()
        if me == "A":  # hold the day open until B arrives (it must not) or 3 s pass
            seen_together.append(inside["B"].wait(timeout=3))

    monkeypatch.setattr(ledger, "after_day_delete", hook)
    errors: list[BaseException] = []

    def write(hour: datetime) -> None:
        try:
            _write(Cluster.objects.get(pk=cluster.pk), hour, _result(hour))
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connections.close_all()

    a = threading.Thread(target=write, args=(hours[0],), name="A")
    a.start()
    assert inside["A"].wait(timeout=10)
    b = threading.Thread(target=write, args=(hours[1],), name="B")
    b.start()
    a.join(timeout=30)
    b.join(timeout=30)
    assert not errors, errors
    assert seen_together == [False]  # B never got inside while A was
    (day_hours, day_cost), (sum_hours, sum_cost) = _day_sums(cluster)
    assert day_hours == pytest.approx(9.0) and sum_hours == pytest.approx(9.0)
    assert day_cost == sum_cost == Decimal("22.500000")
    assert UsageHour.objects.filter(cluster=cluster).count() == 3


@pytest.mark.django_db
def test_every_ledger_table_has_a_unique_key():
    for model in (PodHour, NodeHour, UsageHour, UsageDay, CapacityHour, CapacityDay):
        assert model._meta.constraints, model.__name__


@pytest.mark.django_db
def test_money_is_exact_decimal_and_capacity_cost_reconciles():
    """0.1 USD x 3 GPU-hours is 0.3 exactly (binary floating point says 0.30000000000000004), and what the
    pods are charged plus the unallocated cost is the capacity cost, to the micro-dollar."""
    cluster = Cluster.objects.create(name="money")
    _write(cluster, DAY, _result(DAY, price="0.10"))
    pod = PodHour.objects.get()
    assert pod.cost == Decimal("0.300000") and isinstance(pod.cost, Decimal)
    assert 3 * 0.1 != 0.3  # what floats would have stored
    node = NodeHour.objects.get()
    assert node.unallocated_cost == Decimal("0.500000")  # 5 unallocated GPU-hours x 0.10
    assert pod.cost + node.unallocated_cost == node.capacity_cost == Decimal("0.800000")
    cap = CapacityDay.objects.get()
    assert UsageDay.objects.get().cost + cap.unallocated_cost == cap.capacity_cost


@pytest.mark.django_db
def test_an_unpriced_model_is_unknown_cost_not_zero():
    cluster = Cluster.objects.create(name="unpriced")
    _write(cluster, DAY, _result(DAY, price=None))
    row = UsageHour.objects.get()
    assert row.unpriced_gpu_hours == pytest.approx(3.0) and row.cost == 0
    assert CapacityHour.objects.get().unpriced_gpu_hours == pytest.approx(8.0)


@pytest.mark.django_db
def test_a_final_bucket_is_never_replaced_with_less():
    """Sources answering with no DCGM series (a wiped Prometheus) or a lower coverage keep the stored rows,
    the bucket says degraded_source and why; the operator's explicit acceptance replaces them."""
    cluster = Cluster.objects.create(name="loss")
    assert _write(cluster, DAY, _result(DAY)) == "ok"
    stored = list(PodHour.objects.values_list("working_sm_active", "unmeasured_sm_active"))
    assert _write(cluster, DAY, _result(DAY, series=False)) == "degraded_source"
    bucket = Bucket.objects.get(cluster=cluster, hour=DAY)
    assert bucket.status == "degraded_source" and "no DCGM series" in bucket.last_error
    assert bucket.next_attempt_at is not None
    assert list(PodHour.objects.values_list("working_sm_active", "unmeasured_sm_active")) == stored
    assert _write(cluster, DAY, _result(DAY, series=False), accept_loss=True) == "ok"
    assert PodHour.objects.get().unmeasured_sm_active == pytest.approx(3.0)


@pytest.mark.django_db
def test_backoff_is_capped_and_old_failures_are_abandoned(settings):
    settings.GPUFINOPS_MAX_RETRY_BACKOFF_SECONDS = 3600
    settings.GPUFINOPS_ABANDON_AFTER_DAYS = 14
    now = DAY + timedelta(days=1)
    waits = [ledger.retry_plan(DAY, attempts, "failed", now)[1] - now for attempts in range(1, 12)]
    assert waits[0] == timedelta(minutes=1) and waits[1] == timedelta(minutes=2)
    assert max(waits) == timedelta(hours=1) and waits == sorted(waits)
    assert ledger.retry_plan(DAY, 3, "failed", DAY + timedelta(days=15)) == ("abandoned", None)
    assert ledger.retry_plan(DAY, 3, "degraded_source", DAY + timedelta(days=15)) == ("degraded_source", None)


@pytest.mark.django_db
def test_failing_buckets_wait_out_their_backoff_instead_of_being_due_every_cycle(settings):
    """30 days of failed and abandoned buckets after the last good one: only those whose backoff has passed
    (and the current hour) are due, never all of them."""
    settings.GPUFINOPS_ABANDON_AFTER_DAYS = 14
    cluster = Cluster.objects.create(name="due")
    now = DAY + timedelta(days=30, minutes=10)
    Bucket.objects.create(cluster=cluster, hour=DAY - timedelta(hours=1), state="final", status="ok")
    hour = DAY
    while hour < now - timedelta(hours=1):
        status, next_at = ledger.retry_plan(hour, 8, "source_missing", now)
        Bucket.objects.create(cluster=cluster, hour=hour, status=status, next_attempt_at=next_at)
        hour += timedelta(hours=1)
    assert Bucket.objects.filter(cluster=cluster, status="abandoned").count() >= 14 * 24
    due = due_hours(cluster, now)
    assert len(due) <= 2  # the current hour and at most the one never attempted
    assert all(h >= now - timedelta(hours=2) for h in due)


@pytest.mark.django_db
def test_due_hours_are_capped_per_run_oldest_first(settings):
    cluster = Cluster.objects.create(name="catchup")
    settings.GPUFINOPS_FIRST_RUN_HOURS = 100
    now = DAY + timedelta(minutes=5)
    due = due_hours(cluster, now, limit=10)
    assert len(due) == 10 and due[-1] == DAY and due[0] == DAY - timedelta(hours=100)


def test_rollup_sums_do_not_depend_on_row_order():
    rows = [("a", 0.1, Decimal("0.1")), ("a", 0.2, Decimal("0.2")), ("a", 0.3, Decimal("0.3"))]
    forward = ledger._grouped_sums(rows, 1)
    backward = ledger._grouped_sums(list(reversed(rows)), 1)
    assert forward == backward == [("a", math.fsum([0.1, 0.2, 0.3]), Decimal("0.6"))]
    assert connection.vendor in ("sqlite", "postgresql")
