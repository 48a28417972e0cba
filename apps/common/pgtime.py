"""PostgreSQL `timestamptz` values read by psycopg's own (C) loader.

Django's PostgreSQL backend registers its loader for `timestamptz` on every connection: a Python subclass of psycopg's
pure-Python loader (`psycopg.types.datetime.TimestamptzLoader`) that parses the text and then sets the connection's
time zone (`.replace(tzinfo=...)`). psycopg[binary], a dependency, has a C loader for the same type, but Django's
subclass never uses it. A 10,000-GPU collection reads ~30,000 timestamps a round (nodes and pod observations, twice):
0.12 CPU-s in Django's loader against 0.01 s in psycopg's, measured on 30,000 values (bench/README.md, 2026-12-02,
branch `bucket`).

`use_psycopg_timestamp_loader` (connected to `connection_created` by apps.common) registers, on each new PostgreSQL
connection, a loader that gives exactly what Django's gives: psycopg's default loader's value, set to Django's time
zone. When psycopg's value already carries that very time zone (the session's time zone is Django's, UTC here, as
Django sets it), the default loader's `load` is used as it is, with no Python call per value."""

from __future__ import annotations

import functools
from datetime import tzinfo
from typing import Any

TIMESTAMPTZ = "timestamptz"
_PROBE = b"2000-01-01 00:00:00+00"


@functools.cache
def timestamptz_loader(zone: tzinfo | None) -> type:
    """A psycopg loader class for `timestamptz` giving Django's values in `zone` (Django's `connection.timezone`:
    None chops the zone off, as Django's loader does when USE_TZ is off)."""
    from psycopg import abc, adapters
    from psycopg.adapt import Loader
    from psycopg.pq import Format

    found = adapters.get_loader(adapters.types[TIMESTAMPTZ].oid, Format.TEXT)
    assert found is not None  # psycopg registers one for every built-in type
    default: type[abc.Loader] = found

    class TimestamptzLoader(Loader):
        # Django's create_cursor compares this with the connection's zone and registers its own loader if they differ.
        timezone = zone

        def __init__(self, oid: int, context: Any = None) -> None:
            super().__init__(oid, context)
            self._default = default(oid, context)
            if self._default.load(_PROBE).tzinfo is zone:
                self.load = self._default.load  # type: ignore[method-assign]  # already Django's value

        def load(self, data: Any) -> Any:
            return self._default.load(data).replace(tzinfo=zone)

    return TimestamptzLoader


def use_psycopg_timestamp_loader(sender: Any, connection: Any, **kwargs: Any) -> None:
    """`connection_created` receiver: psycopg's timestamp loader on a new PostgreSQL connection (others untouched)."""
    if connection.vendor != "postgresql":
        return
    connection.connection.adapters.register_loader(TIMESTAMPTZ, timestamptz_loader(connection.timezone))
