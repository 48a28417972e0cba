"""Snapshot history: the `taken_at`-stamped collections per cluster that capacity and queues record at every
collection (their retention is in retention.py). One rule for "the latest one at a time" and for the columns every
row of a collection repeats."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any, TypeVar

from django.db import models
from django.db.models import Max, Q, QuerySet

Row = TypeVar("Row", bound=models.Model)


def latest_per_cluster(model: type[models.Model], clusters: QuerySet[Any], at: datetime) -> Q | None:
    """A filter matching each cluster's latest `model` rows at or before `at` (one query), or None if none.

    `model` is any table with `cluster` and `taken_at` (a collection, or the rows stamped with its time)."""
    latest = (
        model._default_manager.filter(cluster__in=clusters, taken_at__lte=at)
        .values("cluster_id")
        .annotate(t=Max("taken_at"))
        .values_list("cluster_id", "t")
    )
    match = Q()
    for cluster_id, taken_at in latest:
        match |= Q(cluster_id=cluster_id, taken_at=taken_at)
    return match or None


def stamp(collection: Any) -> dict[str, Any]:
    """The cluster and time every row of `collection` repeats (so the latest rows are found without a join)."""
    return {"cluster_id": collection.cluster_id, "taken_at": collection.taken_at}


def snapshot_row(model: type[Row], of: Any, observed: Any, **fields: Any) -> Row:
    """A `model` row of the collection `of` holding what was observed: every field of the dataclass `observed`
    that `model` has a column of the same name for (a snapshot table mirrors what the collectors saw), then
    `fields`, which win (a parent row, values the table stores in another form)."""
    columns = {f.name for f in model._meta.concrete_fields}
    values = {f.name: getattr(observed, f.name) for f in dataclasses.fields(observed) if f.name in columns}
    parent = {"collection": of} if "collection" in columns else {}
    return model(**{**values, **parent, **stamp(of), **fields})
