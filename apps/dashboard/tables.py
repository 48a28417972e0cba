"""A page section: a chart (optional), the table behind it and its CSV, all made from one list of rows, so the
three cannot disagree (reference §4.2: "emit the table in the same template as the chart, from the same
queryset"). Pure: no queries, no templates."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from functools import cached_property
from typing import Any

from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from apps.common.csvfile import csv_bytes
from apps.reports.formats import DASH, arrow, gpuh, ratio_pct, signed_pct, signed_usd, usd
from apps.usage.figures import TENTH, Unit, apportion_places, as_shown
from apps.usage.money import CENT

# Column kinds: how a value is shown (templatetags/dashfmt.py `cell`) and written to CSV.
KINDS = ("text", "gpuh", "usd", "ratio", "activity", "coverage", "int", "gpus", "datetime", "date", "seconds",
         "signed_usd", "signed_pct", "badges")


# Columns printed so the rows add up to the totals row (money in cents, GPU-hours at 0.1).
PRINTED_UNITS: dict[str, Unit] = {"usd": "usd", "gpuh": "gpuh"}
# A total within this of the sum of its rows, per row, is their sum (GPU-hours are floats kept to a millionth).
ADDS_UP = Decimal("0.000001")


@dataclass(frozen=True)
class Column:
    key: str
    label: str  # with its unit: "Cost (USD)", "Idle in allocations (GPU-h)"
    kind: str = "text"
    term: str = ""  # glossary anchor (/glossary/#<term>)
    sortable: bool = False
    # Shown on the screen only after the table's "more columns" toggle (cluster, node group, GPU model, ...), so the
    # name, the sort key and the money fit at 1,280 px; the CSV keeps every column in its own order.
    secondary: bool = False
    # Shown under the row's name on the screen (a pod's finding badges), not in a column of its own: the table stays
    # as wide as it was; the CSV has it as a column.
    beside_name: bool = False

    @property
    def numeric(self) -> bool:
        return self.kind not in ("text", "datetime", "date", "badges")


@dataclass
class Block:
    """One section of a page: an active title stating the finding, maybe a chart, its table and CSV."""

    id: str
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]]
    figure: dict | None = None
    totals: dict[str, Any] | None = None
    note: str = ""  # method footnote (signal, price card, idle rule)
    empty: str = ""  # what an empty table means here
    term: str = ""  # glossary anchor of the title
    aria: str = ""  # text alternative of the chart
    open: bool = False  # the table shown (not folded under the chart)
    extra: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def printed(self) -> dict[int, dict[str, Decimal]]:
        """The money and GPU-hour cells as printed, apportioned to the printed total by largest remainder (the
        e-mail's rule, `apps.usage.figures.apportion_places`), so the printed rows add up to the printed totals row:
        `id(row) -> {column: printed value}`. Over every row of a paged table (`extra["all_rows"]`); only for
        columns whose total is the sum of the rows (a mean or a maximum is left as it is)."""
        if self.totals is None:
            return {}
        rows = self.extra.get("all_rows", self.rows)
        out: dict[int, dict[str, Decimal]] = {id(r): {} for r in rows}
        for c in self.columns:
            unit = PRINTED_UNITS.get(c.kind)
            total = self.totals.get(c.key)
            values = [r.get(c.key) for r in rows]
            if unit is None or total is None or any(v is None for v in values) or not rows:
                continue
            if abs(sum(Decimal(str(v)) for v in values) - Decimal(str(total))) > ADDS_UP * (len(values) + 1):
                continue
            places = CENT if unit == "usd" else TENTH
            for row, value in zip(rows, apportion_places(values, as_shown(total, unit), places), strict=True):
                out[id(row)][c.key] = value
        return out

    @cached_property
    def screen_columns(self) -> list[Column]:
        """The columns in the screen's order: the name, then the money (the usual sort key: idle cost), then the
        rest, the secondary ones last (folded). The CSV keeps `columns` as they are."""
        first, rest = self.columns[:1], [c for c in self.columns[1:] if not c.beside_name]
        money = [c for c in rest if c.kind in ("usd", "signed_usd") and not c.secondary]
        others = [c for c in rest if c not in money and not c.secondary]
        return first + money + others + [c for c in rest if c.secondary]

    @cached_property
    def beside_name(self) -> list[Column]:
        return [c for c in self.columns if c.beside_name]

    @cached_property
    def secondary(self) -> list[Column]:
        return [c for c in self.columns if c.secondary]

    @cached_property
    def body(self) -> list[SafeString]:
        """The table's rows as HTML (escaped here: tenants write names): built in Python, since a template loop
        over thousands of cells costs more than the page's queries."""
        printed = self.printed
        return [row_html(self.screen_columns, {**r, **printed.get(id(r), {})}, beside=self.beside_name)
                for r in self.rows]

    @cached_property
    def foot(self) -> SafeString:
        if self.totals is None:
            return mark_safe("")
        shown = {c.key: as_shown(self.totals[c.key], PRINTED_UNITS[c.kind]) for c in self.columns
                 if c.kind in PRINTED_UNITS and self.totals.get(c.key) is not None}
        return row_html(self.screen_columns, {**self.totals, **shown}, foot=True)

    def csv(self) -> bytes:
        """Exactly the table's rows and columns (headers as on the screen) and its totals row, at the API's
        precision: GPU-hours to a millionth, money exact to the micro-dollar, ratios in percent."""
        header = [c.label for c in self.columns]
        rows: list[Sequence[object]] = [[csv_value(r.get(c.key), c.kind) for c in self.columns] for r in self.rows]
        if self.totals is not None:
            rows.append([csv_value(self.totals.get(c.key), c.kind) for c in self.columns])
        return csv_bytes(header, rows)


def csv_value(value: Any, kind: str) -> object:
    if value is None:
        return None
    if kind in ("ratio", "activity", "coverage"):
        return round(float(value) * 100, 4)
    if kind in ("usd", "signed_usd"):
        return value if isinstance(value, Decimal) else Decimal(str(value))
    if kind == "signed_pct":
        return value if value == "new" else Decimal(str(value))
    if kind in ("gpuh", "gpus"):
        return round(float(value), 6)
    if kind == "datetime" and isinstance(value, datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    if kind == "date" and isinstance(value, date):
        return value.isoformat()
    if kind == "badges":
        return "; ".join(value)
    return value



def _duration(seconds: float) -> str:
    seconds = float(seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def format_cell(value: Any, kind: str = "text") -> str:
    """A value as the screen shows it (reference §4.3): money at 2 dp and GPU-hours at 1 dp with thousands
    separators, ratios in percent at 1 dp, activity that was not measured as "not measured" (never 0 %), signed
    changes with an arrow and a sign, times ISO 8601 UTC."""
    if kind == "activity":
        return "not measured" if value is None else ratio_pct(value)
    if value is None or value == "":
        return DASH
    if kind == "gpuh":
        return gpuh(value)
    if kind == "usd":
        return usd(value)
    if kind in ("ratio", "coverage"):
        return ratio_pct(value)
    if kind == "signed_usd":
        return f"{arrow(value)} {signed_usd(value)}".strip()
    if kind == "signed_pct":
        return signed_pct(value)
    if kind == "int":
        return f"{int(value):,}"
    if kind == "gpus":
        return f"{float(value):,.2f}".rstrip("0").rstrip(".")
    if kind == "seconds":
        return _duration(value)
    if kind == "badges":
        return ", ".join(value)
    if kind == "datetime" and isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    if kind == "date" and isinstance(value, date):
        return value.isoformat()
    return str(value)


def badges_html(labels: Sequence[str], href: str | None = None) -> SafeString:
    """A "badges" cell: each label a badge (the kinds of a row's findings), linked to the row's page's "Why" block
    when the row links somewhere."""
    # An infra loss (a broken GPU the team paid for) in red, like the workload page's badge; the rest amber.
    tone = [(" loss" if b == "infra loss" else "", b) for b in labels]
    if href:
        return format_html_join(" ", '<a class="badge why{}" href="{}#why">{}</a>', ((t, href, b) for t, b in tone))
    return format_html_join(" ", '<span class="badge why{}">{}</span>', tone)


ROW_CLASSES = {"unallocated": "platform", "unassigned": "unassigned"}


def row_html(columns: Sequence[Column], row: dict[str, Any], *, foot: bool = False,
             beside: Sequence[Column] = ()) -> SafeString:
    """One `<tr>`: the first cell a row header (linked down when the row has an `href`), with the badges of the
    `beside` columns under it; numbers right-aligned."""
    cells = []
    for i, c in enumerate(columns):
        value = row.get(c.key)
        text = "" if foot and value is None and c.kind != "activity" and i else format_cell(value, c.kind)
        if i == 0:
            text = text if value is not None or not foot else "Total"
            href = row.get("href") if not foot else None
            inner = format_html('<a href="{}">{}</a>', href, text) if href else escape(text)
            under = [badges_html(row[b.key], href) for b in beside if row.get(b.key) and not foot]
            if under:
                inner = format_html("{}<br>{}", inner, mark_safe(" ".join(under)))
            cells.append(format_html('<th scope="row">{}</th>', inner))
        elif c.kind == "badges" and value and not foot:
            cells.append(format_html("<td>{}</td>", badges_html(value, row.get("href"))))
        else:
            cls = " ".join(n for n in ("num" if c.numeric else "", "sec" if c.secondary else "") if n)
            cells.append(format_html('<td class="{}">{}</td>', cls, text) if cls else format_html("<td>{}</td>", text))
    cls = ROW_CLASSES.get(row.get("kind", ""), "")
    return format_html("<tr{}>{}</tr>", format_html(' class="{}"', cls) if cls else "", mark_safe("".join(cells)))
