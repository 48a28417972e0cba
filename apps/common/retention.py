"""Retention of snapshot history: full collection resolution for a while, then one per hour.

Shared by the capacity and queue snapshot pruners (each a `taken_at`-stamped collection per cluster).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from django.db import models, transaction

from apps.common.inlists import in_batches
from apps.common.timeutils import floor_hour

log = logging.getLogger(__name__)

# Full collection resolution is kept this long; older history keeps one snapshot per hour.
FULL_RESOLUTION_DAYS = 7


def retention_cutoff(now: datetime, keep_days: int) -> datetime:
    """Snapshots before this instant are thinned; aligned to the hour so no hour is split."""
    return floor_hour(now - timedelta(days=keep_days))


def ids_to_thin(rows: Iterable[tuple[int, int, datetime]]) -> list[int]:
    """Given (id, cluster_id, taken_at) rows, the ids to delete so each (cluster, hour) keeps its last one.

    The last snapshot of an hour is kept (rather than an average) so that every number stays a
    real, self-consistent observation: placeable and stranded GPUs of averaged nodes mean nothing.
    """
    keep: dict[tuple[int, datetime], tuple[datetime, int]] = {}
    doomed: list[int] = []
    for row_id, cluster_id, taken_at in rows:
        key = (cluster_id, floor_hour(taken_at))
        current = keep.get(key)
        if current is None:
            keep[key] = (taken_at, row_id)
        elif taken_at > current[0]:
            doomed.append(current[1])
            keep[key] = (taken_at, row_id)
        else:
            doomed.append(row_id)
    return doomed


def thin_collections(model: type[models.Model], *, now: datetime | None, keep_days: int) -> int:
    """Thins `model` collections older than `keep_days` to the last one per cluster and hour; returns deletions."""
    cutoff = retention_cutoff(now or datetime.now(UTC), keep_days)
    rows = (
        model._default_manager.filter(taken_at__lt=cutoff)
        .order_by("cluster_id", "taken_at")
        .values_list("id", "cluster_id", "taken_at")
    )
    doomed = ids_to_thin(rows.iterator())
    for batch in in_batches(doomed):
        with transaction.atomic():
            model._default_manager.filter(id__in=batch).delete()
    log.info("%s history: thinned %d collections before %s", model.__name__, len(doomed), cutoff.isoformat())
    return len(doomed)
