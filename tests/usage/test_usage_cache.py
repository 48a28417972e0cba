"""Cached usage answers: reused while the ledger is unchanged, never after a bucket write."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.inventory.gpus import GpuNode
from apps.inventory.models import Cluster
from apps.usage import services
from apps.usage.ledger import BucketInputs, NodeFact, PodFact, compute_bucket
from apps.usage.selectors import usage_report

H = datetime(2026, 11, 23, 10, tzinfo=UTC)
NODE = NodeFact("n1", "pool", GpuNode("NVIDIA-H100-80GB-HBM3", 8, "none", 7), 3600.0, False, Decimal("2.00"))


def write(cluster: Cluster, gpus: int) -> None:
    pod = PodFact("uid-a", "ns", "a", "n1", "vision", {"nvidia.com/gpu": gpus}, 3600.0)
    result = compute_bucket(BucketInputs(H, 3600, [NODE], [pod], []))
    assert services.claim_bucket(cluster, H, "test")
    services.write_bucket(cluster, H, result, owner="test", covered_until=datetime(2026, 11, 23, 11, tzinfo=UTC))


def report():
    return usage_report(start=H, end=datetime(2026, 11, 23, 11, tzinfo=UTC), group_by=["team"], visible_teams=None)


@pytest.mark.django_db
def test_it_answers_from_the_cache_until_a_bucket_is_rewritten(settings):
    settings.GPUFINOPS_API_CACHE_SECONDS = 300
    cluster = Cluster.objects.create(name="c1")
    write(cluster, 2)
    assert report().totals.allocated_gpu_hours == pytest.approx(2.0)
    with CaptureQueriesContext(connection) as queries:
        again = report()
    assert again.totals.allocated_gpu_hours == pytest.approx(2.0)
    assert len(queries.captured_queries) == 1  # only the ledger version
    write(cluster, 5)
    assert report().totals.allocated_gpu_hours == pytest.approx(5.0)


@pytest.mark.django_db
def test_it_never_shares_an_answer_across_visibility(settings):
    settings.GPUFINOPS_API_CACHE_SECONDS = 300
    write(Cluster.objects.create(name="c1"), 3)
    end = datetime(2026, 11, 23, 11, tzinfo=UTC)
    everyone = usage_report(start=H, end=end, group_by=["team"], visible_teams=None)
    nobody = usage_report(start=H, end=end, group_by=["team"], visible_teams={"other"})
    assert everyone.totals.allocated_gpu_hours == pytest.approx(3.0)
    assert nobody.totals.allocated_gpu_hours == 0
    assert nobody.results == []
