"""The beat's task path: a real Celery worker collects a cluster through Redis."""

from __future__ import annotations

import time

import pytest

from apps.ingest.tasks import collect_cluster_task
from apps.usage.models import Bucket, PodHour
from tests.ingest.conftest import make_cluster


@pytest.mark.django_db(transaction=True)
def test_it_collects_a_cluster_in_a_real_worker(sim_world, celery_worker_proc):
    cluster = make_cluster(sim_world, name="celery")
    result = collect_cluster_task.delay(cluster.pk)
    outcome = result.get(timeout=600)
    assert outcome["cluster"] == "celery"
    # First run: the last 24 hours up to now; the simulated history ends at the top of this hour.
    done = Bucket.objects.filter(cluster=cluster, hour__in=sim_world.hours, status="ok", state="final")
    deadline = time.monotonic() + 10
    while done.count() < 24 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert done.count() == 24
    assert PodHour.objects.filter(cluster=cluster).exists()
