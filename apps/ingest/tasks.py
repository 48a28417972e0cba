"""Thin Celery tasks: ids in, services do the work. Twin command: `manage.py collect`."""

from __future__ import annotations

import random

from celery import shared_task


@shared_task(name="apps.ingest.tasks.collect_all_clusters_task")
def collect_all_clusters_task() -> int:
    from apps.inventory.models import Cluster

    ids = list(Cluster.objects.values_list("id", flat=True))
    for cluster_id in ids:
        # Jitter so clusters don't all query their sources at the same second.
        collect_cluster_task.apply_async((cluster_id,), countdown=random.uniform(0, 30))
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
    }
