"""Writes of the savings app: each written bucket's pod framebuffer (`PodMemoryHour`), called by the collection
after the bucket and its findings (apps/ingest/services.py)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction

from apps.inventory.models import Cluster
from apps.usage.ledger import BucketResult
from apps.usage.sources import MetricsSource

from .models import PodMemoryHour


def record_bucket(cluster: Cluster, hour: datetime, *, seconds: float, result: BucketResult,
                  source: MetricsSource) -> int:
    """The hour's framebuffer per pod of the bucket's rows (the largest device average), replacing what the hour
    had; one query to the source. Returns the rows written."""
    names = {r.fact.name for r in result.pods if r.fact.name}
    peak: dict[tuple[str, str], float] = {}
    if names:
        end = hour + timedelta(seconds=seconds)
        for m in source.pod_memory(hour, end, names):
            key = (m.namespace, m.pod)
            peak[key] = max(peak.get(key, 0.0), m.fb_used_mib)
    held = {(r.fact.namespace, r.fact.name) for r in result.pods}
    rows = [PodMemoryHour(cluster=cluster, hour=hour, namespace=ns, pod=pod, fb_used_mib=round(fb, 3))
            for (ns, pod), fb in sorted(peak.items()) if (ns, pod) in held]
    with transaction.atomic():
        PodMemoryHour.objects.filter(cluster=cluster, hour=hour).delete()
        PodMemoryHour.objects.bulk_create(rows)
    return len(rows)
