"""Monthly partitions of the pod-hour and node-hour tables on PostgreSQL (declarative range partitioning).

At 10,000 GPUs the pod-hour table grows ~600 k rows a week. Partitioned by month on `hour`, a month's rows
are one table: queries over a range touch only their months, and retention drops a whole month at once
(`prune_ledger`) instead of deleting millions of rows. Rollups are not partitioned; they are small and kept
longer. On SQLite the tables stay plain and pruning deletes rows.

Every unique constraint of a partitioned table must contain the partition key: the tables' primary key is
(id, hour) and their unique keys include `hour`. A `DEFAULT` partition catches rows of months not created
yet; `ensure_partitions` (beat, monthly; command twin `manage.py ensure_partitions`) creates the coming
months ahead and moves any such rows into their month.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from django.db import connection, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from apps.common.timeutils import month_start, next_month

log = logging.getLogger(__name__)

PARTITIONED = ("usage_podhour", "usage_nodehour")
KEY = "hour"


def _name(table: str, month: datetime) -> str:
    return f"{table}_p{month:%Y_%m}"


def is_partitioned(conn: BaseDatabaseWrapper, table: str) -> bool:
    if conn.vendor != "postgresql":
        return False
    with conn.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_partitioned_table WHERE partrelid = %s::regclass", [table])
        return cur.fetchone() is not None


def partition(conn: BaseDatabaseWrapper, table: str, *, months_ahead: int = 3) -> None:
    """Turn a plain table into one partitioned by month on `hour`, keeping its rows, indexes and keys."""
    if conn.vendor != "postgresql" or is_partitioned(conn, table):
        return
    old = f"{table}_unpartitioned"
    with conn.cursor() as cur:
        cur.execute(
            "SELECT conname, pg_get_constraintdef(oid), contype FROM pg_constraint "
            "WHERE conrelid = %s::regclass AND contype IN ('u', 'f', 'p')", [table]
        )
        constraints = cur.fetchall()
        cur.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s AND indexname NOT IN "
            "(SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass)", [table, table]
        )
        indexes = cur.fetchall()
        cur.execute(f'SELECT min("{KEY}") FROM "{table}"')
        oldest = cur.fetchone()[0]
        cur.execute(f'ALTER TABLE "{table}" RENAME TO "{old}"')
        for name, _definition, _kind in constraints:
            cur.execute(f'ALTER TABLE "{old}" DROP CONSTRAINT "{name}"')
        for name, _definition in indexes:
            cur.execute(f'DROP INDEX "{name}"')
        cur.execute(f'CREATE TABLE "{table}" (LIKE "{old}" INCLUDING DEFAULTS INCLUDING IDENTITY) '
                    f'PARTITION BY RANGE ("{KEY}")')
        cur.execute(f'ALTER TABLE "{table}" ADD CONSTRAINT "{table}_pkey" PRIMARY KEY (id, "{KEY}")')
        for name, definition, kind in constraints:
            if kind != "p":
                cur.execute(f'ALTER TABLE "{table}" ADD CONSTRAINT "{name}" {definition}')
        for _index, definition in indexes:
            cur.execute(definition)
        cur.execute(f'CREATE TABLE "{table}_default" PARTITION OF "{table}" DEFAULT')
    now = datetime.now(UTC)
    ensure_partitions(conn, table, since=oldest or now, months_ahead=months_ahead)
    with conn.cursor() as cur:
        cur.execute(f'INSERT INTO "{table}" OVERRIDING SYSTEM VALUE SELECT * FROM "{old}"')
        cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f'COALESCE((SELECT max(id) FROM "{table}"), 0) + 1, false)')
        cur.execute(f'DROP TABLE "{old}"')


def unpartition(conn: BaseDatabaseWrapper, table: str) -> None:
    """The reverse of `partition` (for migrating back): one plain table with the same rows and keys."""
    if not is_partitioned(conn, table):
        return
    old = f"{table}_partitioned"
    with conn.cursor() as cur:
        cur.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = %s::regclass AND contype IN ('u', 'f')", [table]
        )
        constraints = cur.fetchall()
        cur.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s AND indexname NOT IN "
            "(SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass)", [table, table]
        )
        indexes = cur.fetchall()
        cur.execute(f'ALTER TABLE "{table}" RENAME TO "{old}"')
        for name, _ in constraints:
            cur.execute(f'ALTER TABLE "{old}" DROP CONSTRAINT "{name}"')
        for name, _ in indexes:
            cur.execute(f'DROP INDEX "{name}"')
        cur.execute(f'CREATE TABLE "{table}" (LIKE "{old}" INCLUDING DEFAULTS INCLUDING IDENTITY)')
        cur.execute(f'ALTER TABLE "{table}" ADD PRIMARY KEY (id)')
        for name, definition in constraints:
            cur.execute(f'ALTER TABLE "{table}" ADD CONSTRAINT "{name}" {definition}')
        for _, definition in indexes:
            cur.execute(definition)
        cur.execute(f'INSERT INTO "{table}" OVERRIDING SYSTEM VALUE SELECT * FROM "{old}"')
        cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f'COALESCE((SELECT max(id) FROM "{table}"), 0) + 1, false)')
        cur.execute(f'DROP TABLE "{old}" CASCADE')


def partitions(conn: BaseDatabaseWrapper, table: str) -> list[tuple[str, datetime]]:
    """The monthly partitions of `table`: (name, first day of its month), oldest first."""
    prefix = f"{table}_p"
    with conn.cursor() as cur:
        cur.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = %s::regclass", [table]
        )
        names = [r[0] for r in cur.fetchall() if r[0].startswith(prefix)]
    return sorted((n, datetime.strptime(n[len(prefix):], "%Y_%m").replace(tzinfo=UTC)) for n in names)


def ensure_partitions(
    conn: BaseDatabaseWrapper | None = None, table: str | None = None, *, since: datetime | None = None,
    months_ahead: int = 3,
) -> list[str]:
    """Create the monthly partitions from `since` (default: this month) to `months_ahead` months ahead, moving
    rows the default partition holds for a new month into it. Returns the partitions created."""
    conn = conn or connection
    created: list[str] = []
    for name in [table] if table else PARTITIONED:
        if not is_partitioned(conn, name):
            continue
        existing = {m for _, m in partitions(conn, name)}
        month = month_start(since or datetime.now(UTC))
        last = month_start(datetime.now(UTC))
        for _ in range(months_ahead):
            last = next_month(last)
        while month <= last:
            if month not in existing:
                _create_month(conn, name, month)
                created.append(_name(name, month))
            month = next_month(month)
    if created:
        log.info("ledger partitions created: %s", ", ".join(created))
    return created


def _create_month(conn: BaseDatabaseWrapper, table: str, month: datetime) -> None:
    """One month's partition; rows already in the default partition for that month move into it."""
    part, end = _name(table, month), next_month(month)
    bounds = f"FROM ('{month.isoformat()}') TO ('{end.isoformat()}')"
    with transaction.atomic(using=conn.alias), conn.cursor() as cur:
        cur.execute(f'CREATE TABLE "{part}" (LIKE "{table}" INCLUDING DEFAULTS)')
        cur.execute(f'INSERT INTO "{part}" SELECT * FROM "{table}_default" WHERE "{KEY}" >= %s AND "{KEY}" < %s',
                    [month, end])
        cur.execute(f'DELETE FROM "{table}_default" WHERE "{KEY}" >= %s AND "{KEY}" < %s', [month, end])
        cur.execute(f'ALTER TABLE "{table}" ATTACH PARTITION "{part}" FOR VALUES {bounds}')


def drop_before(cutoff: datetime, conn: BaseDatabaseWrapper | None = None) -> list[str]:
    """Drop the monthly partitions that end at or before `cutoff` (PostgreSQL); returns their names."""
    conn = conn or connection
    dropped: list[str] = []
    for table in PARTITIONED:
        if not is_partitioned(conn, table):
            continue
        for name, month in partitions(conn, table):
            if next_month(month) <= cutoff:
                with conn.cursor() as cur:
                    # Deferred foreign-key checks of rows written earlier in this transaction must run first:
                    # PostgreSQL refuses to drop a table with pending trigger events.
                    cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
                    cur.execute(f'DROP TABLE "{name}"')
                dropped.append(name)
    return dropped
