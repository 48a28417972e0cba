"""The ledger's tables carry no index that another index already provides (every bucket written pays for each
index: bench/collect's write path), and keep their cluster foreign keys."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import connection

from apps.common.schema import column_indexes

LEDGER_APPS = ("usage", "findings")


def _tables() -> list[str]:
    """The tables a bucket writes: the ledger's and the findings' rows, each keyed by cluster."""
    return sorted(m._meta.db_table for label in LEDGER_APPS for m in apps.get_app_config(label).get_models()
                  if any(f.name == "cluster" for f in m._meta.fields))


def _indexes(table: str) -> dict[str, dict]:
    with connection.cursor() as cur:
        return {name: c for name, c in connection.introspection.get_constraints(cur, table).items() if c["index"]}


@pytest.mark.django_db
def test_no_ledger_index_is_a_prefix_of_another():
    redundant = []
    for table in _tables():
        indexes = _indexes(table)
        for name, index in indexes.items():
            if index["unique"] or index["primary_key"]:
                continue  # a key is a rule, not a lookup aid
            cols = index["columns"]
            covering = [other for other, o in indexes.items()
                        if other != name and o["columns"][:len(cols)] == cols and len(o["columns"]) >= len(cols)]
            if covering:
                redundant.append(f"{table}.{name} {cols} (covered by {', '.join(sorted(covering))})")
    assert redundant == []


@pytest.mark.django_db
def test_cluster_foreign_keys_keep_their_constraint_without_an_index_of_their_own():
    for table in ("usage_podhour", "usage_nodehour", "usage_usagehour", "usage_bucket", "findings_findinghour"):
        with connection.cursor() as cur:
            constraints = connection.introspection.get_constraints(cur, table)
        assert any(c["foreign_key"] == ("inventory_cluster", "id") and c["columns"] == ["cluster_id"]
                   for c in constraints.values()), table
        assert column_indexes(connection.schema_editor(), table, "cluster_id") == []
        assert any(c["unique"] and c["columns"][0] == "cluster_id" for c in constraints.values()), table
