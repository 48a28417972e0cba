"""Snapshot history: the `taken_at`-stamped collections per cluster that capacity and queues record at every
collection (their retention is in retention.py). One rule for "the latest one at a time" and for the columns every
row of a collection repeats."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from django.db import connection, models
from django.db.models import Max, Q, QuerySet

from apps.common.inlists import in_batches

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


def field_values(row: models.Model, fields: Sequence[str]) -> tuple[Any, ...]:
    """The stored values of `fields` of `row` (foreign keys as their ids: nothing is fetched), to tell whether a row
    observed again changed."""
    return tuple(getattr(row, a) for a in _attnames(type(row), tuple(fields)))


@functools.cache
def _attnames(model: type[models.Model], fields: tuple[str, ...]) -> tuple[str, ...]:
    concrete = {f.name: f.attname for f in model._meta.concrete_fields}
    return tuple(concrete[f] for f in fields)


def upsert_observed(model: type[Row], changed: list[Row], unchanged: Iterable[Any], *, unique_fields: list[str],
                    update_fields: list[str], seen_field: str, seen_at: datetime) -> None:
    """Write one observation of many rows: the new and changed rows in one upsert (INSERT … ON CONFLICT DO UPDATE of
    `update_fields`), the rows seen again unchanged (their primary keys) by one UPDATE of `seen_field` alone. In a
    steady state nearly every row is unchanged, and rewriting every column of thousands of rows (JSON included) was
    most of a 10,000-GPU cluster's observation (bench/collect.py)."""
    if changed:
        model._default_manager.bulk_create(changed, batch_size=1000, update_conflicts=True, unique_fields=unique_fields,
                                           update_fields=update_fields)
    pks = list(unchanged)
    if not pks:
        return
    if connection.vendor != "postgresql":
        for batch in in_batches(pks):
            model._default_manager.filter(pk__in=batch).update(**{seen_field: seen_at})
        return
    # One array parameter (`= ANY(%s)`): Django's `pk__in` prepares one parameter per key, 0.1-0.4 s for the 3,860
    # pods of a 10,000-GPU cluster (bench/collect.py --profile).
    quote = connection.ops.quote_name
    columns = {f.name: f.column for f in model._meta.concrete_fields}
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {quote(model._meta.db_table)} SET {quote(columns[seen_field])} = %s "
                       f"WHERE {quote(model._meta.pk.column)} = ANY(%s)", [seen_at, pks])
