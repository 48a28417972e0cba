"""The beat's task path: a real Celery worker collects a cluster through Redis."""

from __future__ import annotations

import time

import pytest

from apps.ingest.tasks import collect_cluster_task
from apps.usage.models import Bucket, PodHour
from tests.ingest.conftest import make_cluster

# The worker collects "now" by the wall clock, while the simulated day ends at the top of the hour the test
# session started in: reach back far enough that a session crossing an hour still covers the whole day.
FIRST_RUN = {"GPUFINOPS_FIRST_RUN_HOURS": "30"}


@pytest.mark.django_db(transaction=True)
def test_it_collects_a_cluster_in_a_real_worker(sim_world, celery_worker_factory):
    celery_worker_factory(extra_env=FIRST_RUN)
    cluster = make_cluster(sim_world, name="celery")
    result = collect_cluster_task.delay(cluster.pk)
    outcome = result.get(timeout=600)
    assert outcome["cluster"] == "celery"
    # First run: the last FIRST_RUN hours up to now, which covers the simulated day however late it is.
    done = Bucket.objects.filter(cluster=cluster, hour__in=sim_world.hours, status="ok", state="final")
    deadline = time.monotonic() + 10
    while done.count() < 24 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert done.count() == 24
    assert PodHour.objects.filter(cluster=cluster).exists()


@pytest.mark.django_db(transaction=True)
def test_it_recovers_after_the_celery_worker_is_killed_mid_bucket(sim_world, celery_worker_factory):
    from apps.ingest.services import collect_cluster

    reference = make_cluster(sim_world, name="reference")
    collect_cluster(reference, sim_world.hours, now=sim_world.end)
    cluster = make_cluster(sim_world, name="killed")
    worker = celery_worker_factory(extra_env={**FIRST_RUN, "GPUFINOPS_BUCKET_LEASE_SECONDS": "2"})
    collect_cluster_task.delay(cluster.pk)
    deadline = time.monotonic() + 300
    while Bucket.objects.filter(cluster=cluster, status="ok").count() < 3:
        assert time.monotonic() < deadline, worker.log_tail()
        time.sleep(0.05)
    worker.kill()  # SIGKILL, in the middle of the run
    assert Bucket.objects.filter(cluster=cluster, status="ok", hour__in=sim_world.hours).count() < 24
    time.sleep(2.5)  # the dead worker's lease runs out
    for _ in range(2):  # within two cycles, driven by bucket state
        collect_cluster(cluster, None, now=sim_world.end)
    assert Bucket.objects.filter(cluster=cluster, status="ok", hour__in=sim_world.hours).count() == 24

    def rows(c):
        fields = [f.attname for f in PodHour._meta.fields if f.attname not in ("id", "cluster_id")]
        return list(PodHour.objects.filter(cluster=c, hour__in=sim_world.hours).order_by(*fields).values_list(*fields))

    assert rows(cluster) == rows(reference)
