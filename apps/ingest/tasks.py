"""Thin Celery tasks: ids in, services do the work. Twin command: `manage.py collect`."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="apps.ingest.tasks.collect_all_clusters_task")
def collect_all_clusters_task() -> int:
    from apps.inventory.models import Cluster

    ids = list(Cluster.objects.values_list("id", flat=True))
    for cluster_id in ids:
        # Queued plainly, without a countdown: a countdown (ETA) task is held by the worker that receives it,
        # outside the prefetch limit, so one idle worker reserved every cluster of the cycle and ran them one
        # after another while the other worker idled (bench/fanout.py). With acks_late and prefetch 1, each
        # free worker takes the next cluster; worker concurrency bounds how many clusters are read at once.
        collect_cluster_task.delay(cluster_id)
    return len(ids)


@shared_task(name="apps.ingest.tasks.collect_cluster_task")
def collect_cluster_task(cluster_id: int, since: str | None = None, until: str | None = None) -> dict:
    """The due buckets of one cluster, or (like `collect --since --until`) every hour of [since, until)."""
    from datetime import datetime

    from apps.common.timeutils import hours_between
    from apps.ingest.services import collect_cluster
    from apps.inventory.models import Cluster

    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return {"cluster": cluster_id, "missing": True}
    hours = None
    if since:
        end = datetime.fromisoformat(until) if until else datetime.now(datetime.fromisoformat(since).tzinfo)
        hours = hours_between(datetime.fromisoformat(since), end)
    report = collect_cluster(cluster, hours)
    return {
        "cluster": cluster.name,
        "written": [h.isoformat() for h in report.written],
        "failed": {h.isoformat(): e for h, e in report.failed.items()},
        "degraded": {h.isoformat(): e for h, e in report.degraded.items()},
        "skipped": [h.isoformat() for h in report.skipped],
        # What the run cost its Prometheus (bench/fanout.py reads them from the result backend).
        "queries": report.queries,
        "samples": report.samples,
    }
