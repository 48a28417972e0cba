"""The periods before a page's: the previous one and those of the average (the reports' comparison periods for
weeks and months, else windows of the same length), their figures, and a figure's change against them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings

from apps.common.timeutils import DAY
from apps.dashboard.scope import Scope, Window
from apps.dashboard.selectors.shared import report
from apps.usage.figures import (
    CapacityFigures,
    CapacityRow,
    Unit,
    UsageFigures,
    as_shown,
    average,
    change,
    not_comparable,
)
from apps.usage.selectors import capacity_rows, final_shares

GroupKey = tuple[str, ...]


@dataclass
class History:
    """Usage of the periods before the page's: `values[i][key]` is the figures of window i for a group key (a tuple
    of the `by` values; `()` for the whole scope); `has[i]` whether window i has any ledger row."""

    windows: list[Window]
    values: list[dict[GroupKey, UsageFigures]]
    has: list[bool]
    of: Window | None = None  # the page's period
    final_shares: list[float | None] | None = None  # share of each window's hours final (None: not measured)

    @property
    def reasons(self) -> list[str | None]:
        """Why each window cannot be compared with (None: it can): no data, or too few of its hours final
        (GPUFINOPS_COMPARE_MIN_FINAL)."""
        shares = self.final_shares if self.final_shares is not None else [1.0 if h else None for h in self.has]
        minimum = settings.GPUFINOPS_COMPARE_MIN_FINAL
        return [not_comparable(share if h else None, minimum) for share, h in zip(shares, self.has, strict=True)]

    @property
    def comparable(self) -> list[bool]:
        return [r is None for r in self.reasons]

    @property
    def previous_label(self) -> str:
        """"2026-W47", "2026-10", "the previous 7 days", "the previous period"."""
        w = self.of
        if w is None or w.kind in ("week", "month"):
            return self.windows[0].label
        days = w.length / DAY
        return f"the previous {days:g} days" if days == int(days) else "the previous period"

    @property
    def average_label(self) -> str:
        w = self.of
        if w is not None and w.kind == "month":
            return "3-month avg"
        if w is not None and w.kind == "week":
            return "4-week avg"
        return f"{len(self.windows)}-period avg"

    def series(self, key: GroupKey, field: str) -> list[float | Decimal]:
        """One figure of one group in each window (zero where the group had none)."""
        return [getattr(v.get(key, UsageFigures()), field) for v in self.values]

    def costs(self, key: GroupKey, field: str = "cost") -> list[Decimal]:
        """One money figure of one group in each window."""
        return [getattr(v.get(key, UsageFigures()), field) for v in self.values]


def history(scope: Scope, *, by: Sequence[str] = (), signal: str | None = None,
            filters: Mapping[str, Sequence[str]] | None = None) -> History:
    """The previous period (first) and the others of the average: one query over all of them by day when they
    are whole days (the rows folded into each period), else one per period."""
    windows = scope.window.history()
    values: list[dict[GroupKey, UsageFigures]] = [{} for _ in windows]
    has = [False] * len(windows)
    if all(w.whole_days for w in windows):
        rep = report(scope, [*by, "day"], window=Window(windows[-1].start, windows[0].end, "custom", "", ()),
                     signal=signal, filters=filters)
        index = {}
        for i, w in enumerate(windows):
            for d in w.dates():
                index[d.isoformat()] = i
        for r in rep.results:
            n = index.get(r.group["day"])
            if n is None:
                continue
            has[n] = True
            key = tuple(r.group[k] for k in by)
            values[n][key] = values[n].get(key, UsageFigures()) + r.figures
            if by:
                values[n][()] = values[n].get((), UsageFigures()) + r.figures
    else:
        for i, w in enumerate(windows):
            rep = report(scope, list(by), window=w, signal=signal, filters=filters)
            has[i] = bool(rep.results)
            if by:
                values[i].update((tuple(r.group[k] for k in by), r.figures) for r in rep.results)
            values[i][()] = rep.totals
    clusters = scope.filters.get("cluster") or None
    shares = final_shares([(w.start, w.end) for w in windows], clusters=clusters)
    return History(windows, values, has, scope.window, shares)


def change_vs_history(current: float | Decimal, hist: History, series: Sequence[float | Decimal],
                      kind: Unit = "usd") -> dict[str, Any]:
    """The change of a figure vs the previous period and vs the average of the history periods, each only where
    the coverage is comparable (`apps.usage.figures.not_comparable`: else "n/a" and why), as the finance report
    computes it on printed figures (`apps.usage.figures.change`), as the page shows them."""
    cur = as_shown(current, kind)
    reasons = hist.reasons
    prev = as_shown(series[0], kind) if reasons[0] is None else None
    mean = average([v for v, r in zip(series, reasons, strict=True) if r is None])
    avg_shown = as_shown(mean, kind) if mean is not None else None
    vs_prev, vs_avg = change(cur, prev), change(cur, avg_shown)
    return {"kind": kind, "previous": prev, "previous_label": hist.previous_label,
            "previous_range": hist.windows[0].caption(), "previous_reason": reasons[0],
            "delta": vs_prev.delta, "delta_pct": vs_prev.delta_pct,
            "average": avg_shown, "average_count": sum(r is None for r in reasons), "average_of": len(hist.windows),
            "average_label": hist.average_label, "avg_delta": vs_avg.delta, "avg_pct": vs_avg.delta_pct}


# ---- Capacity of the same periods (callers who see every team) ----


def capacity_in_scope(scope: Scope, row: CapacityRow) -> bool:
    """Capacity belongs to no team: only the node group and GPU model filters narrow it."""
    return all(row.group.get(k) in scope.filters[k] for k in ("node_group", "gpu_model") if scope.filters.get(k))


def capacity_history(scope: Scope, hist: History, clusters: Sequence[str] | None) -> list[CapacityFigures]:
    """Capacity figures of each history window (one query by day when they are whole days)."""
    windows = hist.windows
    if all(w.whole_days for w in windows):
        rows = capacity_rows(start=windows[-1].start, end=windows[0].end, group_by=["day", "node_group", "gpu_model"],
                             clusters=clusters)
        return [CapacityFigures.fold(
            r.figures for r in rows
            if w.start.date().isoformat() <= r.group["day"] < w.end.date().isoformat() and capacity_in_scope(scope, r)
        ) for w in windows]
    return [CapacityFigures.fold(
        r.figures for r in capacity_rows(start=w.start, end=w.end, group_by=["node_group", "gpu_model"],
                                         clusters=clusters) if capacity_in_scope(scope, r)
    ) for w in windows]
