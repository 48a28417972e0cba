"""Read statements compiled once per query shape and process, and several run in one round trip (PostgreSQL).

Why: an uncached API answer asks the same few query shapes over and over with different values, and Django compiles
each queryset to SQL again on every request (about a seventh of an uncached usage request's CPU, bench/README.md,
issue 24). A shape's SQL text depends only on which filters are present and how many values each has, not on the
values: `Template.compile` builds it once through the ORM, from stand-in values (`Markers`), and each call fills in
its own values. The ORM stays the one place the SQL is written; the template only remembers its output.

`fetch_together` sends statements that do not depend on each other in one round trip (one multi-statement query):
under load each round trip to the database costs a wait for the CPU.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import connection
from django.db.models import QuerySet

# A parameter's origin: a value by name (True: that value's date()), or None for a constant of the shape.
Slot = tuple[str, bool] | None
_TEXT_MARKER = "\x00marker\x00"  # no real value starts with a NUL (PostgreSQL text cannot hold one)


class Markers:
    """Stand-ins for a statement's variable values while its SQL is compiled once: each unique and of the real
    value's type, so every compiled parameter can be traced back to the name it stands for."""

    def __init__(self) -> None:
        self._slots: dict[Hashable, tuple[str, bool]] = {}

    def text(self, name: str) -> str:
        """A string value; markers of one prefix sort in the order of their names' indexes (`texts`)."""
        value = f"{_TEXT_MARKER}{name}"
        self._slots[value] = (name, False)
        return value

    def texts(self, name: str, count: int) -> list[str]:
        """`count` string values, named `name.0`, `name.1`, ..., sorted in that order (fill them sorted)."""
        return [self.text(f"{name}.{i:05d}") for i in range(count)]

    def moment(self, name: str, *, hour: int = 0) -> datetime:
        """An aware datetime at `hour` (0: midnight, as whole-day ranges are), which also stands for its own date()
        (day rollups filter on the date)."""
        value = datetime(1000 + len(self._slots), 1, 1, hour, tzinfo=UTC)  # never a real ledger time
        self._slots[value] = (name, False)
        self._slots[value.date()] = (name, True)
        return value

    def slot(self, param: object) -> Slot:
        try:
            return self._slots.get(param)  # type: ignore[arg-type]
        except TypeError:  # unhashable: a constant
            return None


def text_values(name: str, values: Sequence[str]) -> dict[str, str]:
    """The values of `Markers.texts(name, len(values))`, in the same (sorted) order."""
    return {f"{name}.{i:05d}": value for i, value in enumerate(sorted(values))}


@dataclass(frozen=True)
class Template:
    """One query shape's SQL and where each of its parameters comes from."""

    sql: str
    slots: tuple[Slot, ...]
    constants: tuple[object, ...]

    @classmethod
    def compile(cls, build: Callable[[Markers], tuple[str, Sequence[Any]]]) -> Template:
        """`build` returns SQL and parameters for the marker values it was given (through the ORM)."""
        markers = Markers()
        sql, params = build(markers)
        slots = tuple(markers.slot(p) for p in params)
        for slot, param in zip(slots, params, strict=True):
            if slot is None and isinstance(param, str) and _TEXT_MARKER in param:
                # The ORM changed a marker on its way into the SQL: it cannot be traced, so fail, never send it.
                raise ValueError(f"a marker value was transformed while compiling: {param!r}")
        return cls(sql, slots, tuple(None if s is not None else p for s, p in zip(slots, params, strict=True)))

    def params(self, values: Mapping[str, Any]) -> list[Any]:
        out: list[Any] = []
        for slot, constant in zip(self.slots, self.constants, strict=True):
            if slot is None:
                out.append(constant)
                continue
            value = values[slot[0]]
            out.append(value.date() if slot[1] and isinstance(value, datetime) else value)
        return out


@dataclass(frozen=True)
class RowShape:
    """How a values() queryset's rows come back: the column names and Django's converters (sums to float or
    Decimal, dates), so a template's raw rows read exactly as the queryset's would."""

    names: tuple[str, ...]
    converters: tuple[tuple[int, tuple[Callable[..., Any], ...], Any], ...]

    @classmethod
    def of(cls, qs: QuerySet, *, raw: Collection[str] = ()) -> tuple[RowShape, str, Sequence[Any]]:
        """The shape, SQL and parameters of a values() queryset, compiled once. Columns named in `raw` are left as
        the database returns them: their reader normalizes them itself (a usage answer's sums: the converters
        would only make each float a float again and each Decimal a Decimal, at every row)."""
        query = qs.query
        compiler = query.get_compiler(using=qs.db)
        sql, params = compiler.as_sql()
        names = list(query.selected) if query.selected else [
            *query.extra_select, *query.values_select, *query.annotation_select]
        fields = [s[0] for s in compiler.select[: compiler.col_count]]
        converters = tuple((i, tuple(convs), expr) for i, (convs, expr) in compiler.get_converters(fields).items()
                           if names[i] not in raw)
        return cls(tuple(names), converters), sql, params

    def tuples(self, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """The rows in `names` order, converted; as they came when no column needs converting."""
        if not self.converters:
            return rows
        out = []
        for raw in rows:
            row = list(raw)
            for i, convs, expr in self.converters:
                for conv in convs:
                    row[i] = conv(row[i], expr, connection)
            out.append(tuple(row))
        return out


def fetch_together(statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple[Any, ...]]]:
    """Each statement's rows; on PostgreSQL all sent in one round trip, elsewhere one by one. Statements must not
    depend on each other's effects (reads).

    On PostgreSQL the statements go as one multi-statement query (the simple protocol: one implicit transaction, so
    they also read one snapshot), bound by psycopg's client-side binding as Django binds every query; it cost less
    Python and server time than psycopg's pipeline mode (bench/README.md, session 13)."""
    with connection.cursor() as cursor:
        mogrify = getattr(cursor.cursor, "mogrify", None)  # psycopg's ClientCursor: Django's default binding
        if connection.vendor == "postgresql" and len(statements) > 1 and mogrify is not None:
            cursor.execute(";\n".join(mogrify(sql, params) for sql, params in statements))
            results = [list(cursor.fetchall())]
            while cursor.nextset():
                results.append(list(cursor.fetchall()))
            if len(results) != len(statements):
                raise RuntimeError(f"{len(statements)} statements gave {len(results)} results")
            return results
        results = []
        for sql, params in statements:
            cursor.execute(sql, params)
            results.append(list(cursor.fetchall()))
        return results
