"""Formats of the dashboard (reference §4.3), on top of the reports' (`apps/reports/formats.py`): money at 2 dp
and GPU-hours at 1 dp with thousands separators, ratios in percent at 1 dp, activity that was not measured shown
as "not measured" (never 0 %), signed changes with an arrow and a sign (never colour alone), dates ISO 8601 in
UTC."""

from __future__ import annotations

from decimal import Decimal

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from apps.dashboard.scope import Scope
from apps.dashboard.tables import format_cell
from apps.reports.formats import arrow, signed_pct, signed_usd

register = template.Library()


@register.filter
def cell(value, kind: str = "text") -> str:
    """A table cell or tile value by its column kind (apps/dashboard/tables.py)."""
    return format_cell(value, kind)


@register.filter
def numeric(kind: str) -> bool:
    return kind not in ("text", "datetime", "date")


@register.filter
def get(row, key):
    """row[key] for dict rows (template variables cannot be computed keys)."""
    try:
        return row.get(key) if hasattr(row, "get") else getattr(row, key, None)
    except TypeError:
        return None


@register.simple_tag
def change(ch) -> str:
    """"▲ +$12.30 (+4.1 %) vs 2026-W47" and "▼ -$3.00 (-1.0 %) vs 4-week avg", each on its line; what there
    is nothing to compare with is said so. The exact ranges are in the title (hover, focus)."""
    if not ch:
        return ""
    fmt = signed_usd if ch["kind"] == "usd" else _signed_gpuh
    lines = []
    if ch["delta"] is not None:
        pct = f" ({signed_pct(ch['delta_pct'])})" if ch["delta_pct"] is not None else ""
        lines.append(format_html('<span title="{}">{} {}{} vs {}</span>', ch["previous_range"], arrow(ch["delta"]),
                                 fmt(ch["delta"]), pct, ch["previous_label"]))
    elif ch.get("previous_reason") and ch["previous_reason"] != "no data":
        lines.append(format_html('<span title="{}">n/a vs {}: {}</span>', ch["previous_range"], ch["previous_label"],
                                 ch["previous_reason"]))
    else:
        lines.append(format_html('<span title="{}">no data for {}</span>', ch["previous_range"], ch["previous_label"]))
    if ch["avg_delta"] is not None:
        pct = f" ({signed_pct(ch['avg_pct'])})" if ch["avg_pct"] is not None else ""
        partial = (f" ({ch['average_count']} of {ch['average_of']} periods covered)"
                   if ch["average_count"] < ch["average_of"] else "")
        lines.append(format_html('<span title="average of the {} previous periods with comparable coverage">'
                                 '{} {}{} vs {}{}</span>', ch["average_count"], arrow(ch["avg_delta"]),
                                 fmt(ch["avg_delta"]), pct, ch["average_label"], partial))
    elif ch["average_of"]:
        lines.append(format_html("<span>n/a vs {}: no earlier period with comparable coverage</span>",
                                 ch["average_label"]))
    return format_html("{}", mark_safe("<br>".join(str(x) for x in lines)))


def _signed_gpuh(value) -> str:
    d = Decimal(str(value))
    sign = "+" if d > 0 else "-" if d < 0 else ""
    return f"{sign}{abs(d):,.1f} GPU-h"


@register.simple_tag
def qs(scope: Scope, **overrides) -> str:
    """The page's query string with some parameters changed (None drops one)."""
    return scope.query(**{k: (None if v == "" else v) for k, v in overrides.items()})


@register.simple_tag
def sort_query(scope: Scope, key: str, sort: str, order: str) -> str:
    """The query string that sorts by `key`: descending first, toggled when already sorted by it."""
    new = "asc" if key == sort and order == "desc" else "desc"
    return scope.query(sort=key, order=new, page=None)


@register.filter
def aria_sort(key: str, sort_order: str) -> str:
    sort, _, order = sort_order.partition(":")
    if key != sort:
        return "none"
    return "ascending" if order == "asc" else "descending"


@register.simple_tag
def sees_every_team(user) -> bool:
    """Whether the user sees every team (staff, finance): the fleet pages are theirs."""
    from apps.accounts.selectors import sees_all_teams

    return sees_all_teams(user)
