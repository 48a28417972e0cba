"""Retention of snapshot history: full collection resolution for a while, then one per hour.

Pure helpers, shared by the capacity and queue snapshot pruners.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta


def retention_cutoff(now: datetime, keep_days: int) -> datetime:
    """Snapshots before this instant are thinned; aligned to the hour so no hour is split."""
    return (now - timedelta(days=keep_days)).replace(minute=0, second=0, microsecond=0)


def ids_to_thin(rows: Iterable[tuple[int, int, datetime]]) -> list[int]:
    """Given (id, cluster_id, taken_at) rows, the ids to delete so each (cluster, hour) keeps its last one.

    The last snapshot of an hour is kept (rather than an average) so that every number stays a
    real, self-consistent observation: placeable and stranded GPUs of averaged nodes mean nothing.
    """
    keep: dict[tuple[int, datetime], tuple[datetime, int]] = {}
    doomed: list[int] = []
    for row_id, cluster_id, taken_at in rows:
        key = (cluster_id, taken_at.replace(minute=0, second=0, microsecond=0))
        current = keep.get(key)
        if current is None:
            keep[key] = (taken_at, row_id)
        elif taken_at > current[0]:
            doomed.append(current[1])
            keep[key] = (taken_at, row_id)
        else:
            doomed.append(row_id)
    return doomed
