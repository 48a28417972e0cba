"""The usage report's compiled statements (apps/usage/selectors/report_queries.py) against the ORM path they are
compiled from: the same rows, capacity and provisional flag over many combinations of range, grouping, signal,
visibility and filters, on PostgreSQL (elsewhere the ORM path is the only one)."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest

from apps.usage.selectors import capacity_and_provisional, expand_group_by, has_provisional_buckets, make_filters
from apps.usage.selectors.report_queries import _statements, grouped_queryset, report_rows, report_source
from apps.usage.selectors.rollups import apply_filters
from tests.api.conftest import DAY

RANGES = [
    (DAY, DAY + timedelta(days=1)),  # one whole day: the day rollups
    (DAY - timedelta(days=3), DAY + timedelta(days=4)),  # a week, with the provisional hour of the 24th
    (DAY + timedelta(hours=1), DAY + timedelta(days=1, hours=3)),  # partial hours: the hour rollups
    (DAY + timedelta(days=400), DAY + timedelta(days=401)),  # nothing there
]
GROUPINGS = [
    ["team"], ["team", "namespace"], ["cluster", "node_group", "gpu_model"], ["team", "day"], ["workload"],
    ["pod"], ["cluster", "day"], ["namespace", "hour"],
]
VISIBLE = [None, {"vision"}, {"vision", "nlp"}, {"nobody"}]
FILTERS = [
    {}, {"cluster": ["alpha"]}, {"cluster": ["alpha", "beta"]}, {"team": ["vision"], "namespace": ["train", "idle"]},
    {"workload": ["Job/resnet", "Pod/idle-train"]}, {"cluster": ["nowhere"]},
]


def _orm(start, end, group_by, signal, visible, filters):
    """What compute_usage_report's ORM path reads for the same arguments."""
    qs, source = report_source(start, end, group_by, filters)
    by_day = source in ("day", "workload-day")
    qs = apply_filters(qs, visible, filters)
    grouped, columns = grouped_queryset(qs, group_by, signal, by_day)
    rows = list(grouped)
    clusters = filters.get("cluster")
    if visible is None:
        capacity, provisional = capacity_and_provisional(start=start, end=end, clusters=clusters, by_day=by_day)
    else:
        capacity = None
        provisional = has_provisional_buckets(start=start, end=end, clusters=clusters, among=qs.values("cluster_id"))
    return rows, columns, capacity, provisional


def test_compiled_statements_answer_exactly_as_the_orm_path(ledger, postgres_db):
    combinations = itertools.product(RANGES, GROUPINGS, VISIBLE, FILTERS)
    seen = {"rows": 0, "capacity": 0, "provisional": 0, "member provisional": 0}
    for n, ((start, end), group_by, visible, raw_filters) in enumerate(combinations):
        group_by = expand_group_by(group_by)
        filters = make_filters(raw_filters)
        signal = ("sm_active", "gpu_util")[n % 2]
        if "hour" in group_by and end - start > timedelta(days=2):
            continue  # the API refuses it before reading (TooLarge)
        compiled = report_rows(start=start, end=end, group_by=group_by, signal=signal, visible_teams=visible,
                               filters=filters)
        assert compiled is not None
        rows, columns, capacity, provisional = _orm(start, end, group_by, signal, visible, filters)
        where = (start, end, group_by, signal, visible, filters)
        # The same rows, values and types, the sums as the database gives them included (no converter runs on them).
        compiled_rows = [dict(zip(compiled.names, row, strict=True)) for row in compiled.rows]
        assert compiled_rows == rows, where
        assert [type(v) for row in compiled_rows for v in row.values()] == [
            type(v) for row in rows for v in row.values()], where
        assert compiled.columns == columns, where
        assert compiled.capacity == capacity, where
        assert compiled.provisional == provisional, where
        seen["rows"] += bool(rows)
        seen["capacity"] += bool(capacity and capacity.capacity_gpu_hours)
        seen["provisional"] += provisional and visible is None
        seen["member provisional"] += provisional and visible is not None
    # The combinations reach every case: rows, capacity, and the provisional hour both ways.
    assert all(count >= 5 for count in seen.values()), seen


def test_a_shape_is_compiled_once_and_reused_with_other_values(ledger, postgres_db):
    _statements.cache_clear()
    start, end = RANGES[0]
    for team, cluster in (("vision", "alpha"), ("nlp", "beta"), ("vision", "beta")):
        report_rows(start=start, end=end, group_by=["team"], signal="sm_active", visible_teams={team},
                    filters=make_filters({"cluster": [cluster]}))
    assert (_statements.cache_info().misses, _statements.cache_info().hits) == (1, 2)
    report_rows(start=start, end=end, group_by=["team"], signal="sm_active", visible_teams={"vision", "nlp"},
                filters=make_filters({"cluster": ["alpha"]}))
    assert _statements.cache_info().misses == 2  # two teams: another shape (`IN (%s, %s)`)


def test_a_caller_without_teams_is_answered_by_the_orm_path(ledger, postgres_db):
    start, end = RANGES[0]
    assert report_rows(start=start, end=end, group_by=["team"], signal="sm_active", visible_teams=set(),
                       filters={}) is None



def test_a_marker_the_orm_transforms_fails_the_compilation_instead_of_reaching_the_database(db):
    from apps.common.statements import Template
    from apps.inventory.models import Team

    def build(m):
        return Team.objects.filter(name__icontains=m.text("name")).values("name").query.sql_with_params()

    with pytest.raises(ValueError, match="transformed"):
        Template.compile(build)
    traced = Template.compile(lambda m: Team.objects.filter(name=m.text("name")).values("name").query.sql_with_params())
    assert traced.params({"name": "vision"}) == ["vision"]


def test_statements_fetched_together_are_bound_as_each_alone_would_be(db):
    """`fetch_together`: every statement's own rows, in order, one of them empty; hostile text values and a literal
    `%` come back as themselves (bound by psycopg, never pasted into the SQL)."""
    from django.db import connection

    from apps.common.statements import fetch_together
    from apps.inventory.models import Team

    hostile = ["'; DROP TABLE inventory_team; --", "100 %s %% \\ \" $1 \x7f ü", "a'b"]
    Team.objects.bulk_create([Team(name=name) for name in hostile])
    names = Team.objects.filter(name__in=hostile).order_by("name").values_list("name").query.sql_with_params()
    statements = [
        names,
        ("SELECT %s, 'literal %%'", ["it's 50 %"]),
        ("SELECT 1 WHERE %s = %s", [1, 2]),  # no rows
        names,
    ]
    alone = []
    for sql, params in statements:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            alone.append(list(cursor.fetchall()))
    together = fetch_together(statements)
    assert together == alone
    assert [r[0] for r in together[0]] == sorted(hostile) and together[1] == [("it's 50 %", "literal %")]
    assert together[2] == [] and Team.objects.filter(name__in=hostile).count() == 3
