"""Timestamps read by psycopg's loader (apps/common/pgtime.py) are the values Django's own loader gives: same instants,
same time zone objects, NULLs, offsets and microseconds alike, for Django's zone and for another."""

from __future__ import annotations

from datetime import UTC
from zoneinfo import ZoneInfo

import pytest

from apps.common.pgtime import timestamptz_loader

# Text PostgreSQL sends for a spread of timestamps: other offsets, fractions, far dates, leap day, NULL.
VALUES = ["2026-12-02 03:00:00+00", "2026-12-02 03:00:00.123456+05:30", "1999-12-31 23:59:59.5-08",
          "2024-02-29 12:00:00+00", "0001-01-01 00:00:00+00", "9999-12-31 23:59:59.999999+00", None]
QUERY = "SELECT v::timestamptz FROM unnest(%s::text[]) WITH ORDINALITY AS t(v, i) ORDER BY i"


def read(cursor, loader: type | None) -> list:  # type: ignore[no-untyped-def]
    if loader is not None:
        cursor.cursor.adapters.register_loader("timestamptz", loader)
    cursor.execute(QUERY, [VALUES])
    return [row[0] for row in cursor.fetchall()]


@pytest.mark.parametrize("zone", [UTC, ZoneInfo("Europe/Paris")], ids=["django-zone", "another-zone"])
def test_psycopg_loader_gives_what_djangos_gives(zone, postgres_db):
    from django.db import connection
    from django.db.backends.postgresql.psycopg_any import register_tzloader

    with connection.cursor() as ours, connection.cursor() as django:
        register_tzloader(zone, django.cursor)
        got, expected = read(ours, timestamptz_loader(zone)), read(django, None)
    assert len(expected) == len(VALUES) and expected[-1] is None
    assert [repr(v) for v in got] == [repr(v) for v in expected]
    assert [v.tzinfo if v else None for v in got] == [v.tzinfo if v else None for v in expected]


def test_every_postgresql_connection_uses_it(postgres_db):
    from django.db import connection
    from psycopg.pq import Format

    connection.ensure_connection()
    adapters = connection.connection.adapters
    oid = adapters.types["timestamptz"].oid
    assert adapters.get_loader(oid, Format.TEXT) is timestamptz_loader(connection.timezone)
    with connection.cursor() as cursor:  # the zones agree, so Django registers no loader of its own on its cursors
        assert cursor.cursor.adapters.get_loader(oid, Format.TEXT) is timestamptz_loader(connection.timezone)
