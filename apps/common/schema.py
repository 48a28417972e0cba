"""Schema changes that Django's migration operations would make too expensively on large tables."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor


def column_indexes(schema_editor: BaseDatabaseSchemaEditor, table: str, column: str) -> list[str]:
    """Names of the plain (non-unique, non-key) indexes on exactly `column` of `table`."""
    conn = schema_editor.connection
    with conn.cursor() as cur:
        constraints = conn.introspection.get_constraints(cur, table)
    return sorted(
        name for name, c in constraints.items()
        if c["index"] and c["columns"] == [column] and not c["unique"] and not c["primary_key"]
    )


def drop_column_index(schema_editor: BaseDatabaseSchemaEditor, table: str, column: str) -> None:
    """Drop a foreign key's own index and nothing else.

    Django's AlterField(db_index=False) on a foreign key drops and re-adds the key's constraint, which then
    validates every row: on a year of partitioned ledger rows that is a full scan under lock. Dropping the
    index alone is instant, and on a partitioned table it drops the partitions' indexes with it.
    """
    for name in column_indexes(schema_editor, table, column):
        schema_editor.execute(f"DROP INDEX {schema_editor.quote_name(name)}")


def create_column_index(schema_editor: BaseDatabaseSchemaEditor, table: str, column: str) -> None:
    """The reverse of `drop_column_index` (for migrating back)."""
    if not column_indexes(schema_editor, table, column):
        name = schema_editor.quote_name(f"{table}_{column}_idx")
        schema_editor.execute(f"CREATE INDEX {name} ON {schema_editor.quote_name(table)} "
                              f"({schema_editor.quote_name(column)})")


def drop_column_indexes(tables: Sequence[str], column: str) -> migrations.RunPython:
    """A migration operation: `drop_column_index` on each of `tables` (reversed by `create_column_index`)."""

    def forward(apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
        for table in tables:
            drop_column_index(schema_editor, table, column)

    def backward(apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
        for table in tables:
            create_column_index(schema_editor, table, column)

    return migrations.RunPython(forward, backward)
