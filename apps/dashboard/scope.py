"""What a page is about, read from its query string: the period, the filters and the signal (all shareable).

* Period: `?period=2026-W48` (ISO week, Monday 00:00 UTC), `?period=2026-11` (calendar month), `?days=7` (the
  last N whole UTC days, today included), or `?start=2026-11-20&end=2026-11-27` (custom, half-open, UTC dates or
  times on the hour). Default: the last 7 days. Weeks and months are the reports' periods
  (`apps.reports.periods`): the same bounds as the e-mail.
* Filters: `cluster`, `team`, `namespace`, `node_group`, `gpu_model` (each repeatable), `signal`.
* Bad input never fails a page: each bad value is dropped with a message saying why, and the page shows the
  rest. Team filters are narrowed to the teams the caller may see (visibility stays server-side).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from urllib.parse import urlencode

from django.conf import settings
from django.utils import timezone
from rest_framework.exceptions import ValidationError

from apps.common.params import parse_datetime_value, parse_text_list
from apps.common.timeutils import DAY, floor_day, to_utc
from apps.reports.content import comparison_periods
from apps.reports.periods import MONTHLY, WEEKLY, Period, month, parse_period, week
from apps.usage.activity import SIGNALS, default_signal

DEFAULT_DAYS = 7
FILTERS: tuple[str, ...] = ("cluster", "team", "namespace", "node_group", "gpu_model")
FILTER_LABELS = [("cluster", "Cluster"), ("team", "Team"), ("namespace", "Namespace"), ("node_group", "Node group"),
                 ("gpu_model", "GPU model")]
# Buckets of the charts: hours up to HOUR_BUCKET_DAYS, days up to DAY_BUCKET_DAYS, ISO weeks beyond.
HOUR_BUCKET_DAYS = 3
DAY_BUCKET_DAYS = 92
HISTORY_WINDOWS = 4  # "the 4-week average": the 4 windows before (the reports' 3 months for a month)
SIGNAL_NAMES = {
    "sm_active": "SM active (DCGM_FI_PROF_SM_ACTIVE)",
    "gr_engine_active": "GR engine active (DCGM_FI_PROF_GR_ENGINE_ACTIVE)",
    "tensor_active": "Tensor active (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE)",
    "gpu_util": "GPU_UTIL (DCGM_FI_DEV_GPU_UTIL, naive)",
}


def _message(exc: ValidationError) -> str:
    detail = exc.detail
    if isinstance(detail, dict):
        return " ".join(str(m) for msgs in detail.values() for m in (msgs if isinstance(msgs, list) else [msgs]))
    return str(detail)


@dataclass(frozen=True)
class Window:
    """A half-open UTC range `[start, end)` with how it was chosen (so links keep it) and how to compare it."""

    start: datetime
    end: datetime
    kind: str  # "week", "month", "days", "custom"
    label: str  # "2026-W48", "2026-11", "last 7 days", "2026-11-20 – 2026-11-27"
    params: tuple[tuple[str, str], ...]  # the query parameters that choose it

    @property
    def period(self) -> Period | None:
        """The reports' period (ISO week or month) this window is, if it is one."""
        if self.kind == "week":
            return Period(self.start, self.end, WEEKLY, self.label)
        if self.kind == "month":
            return Period(self.start, self.end, MONTHLY, self.label)
        return None

    @property
    def length(self) -> timedelta:
        return self.end - self.start

    @property
    def whole_days(self) -> bool:
        return floor_day(self.start) == self.start and floor_day(self.end) == self.end

    @property
    def bucket(self) -> str:
        """The charts' bucket: hour for short ranges (or ranges not on midnight), day, or ISO week."""
        if self.length <= timedelta(days=HOUR_BUCKET_DAYS) or not self.whole_days:
            return "hour"
        return "day" if self.length <= timedelta(days=DAY_BUCKET_DAYS) else "week"

    @property
    def noun(self) -> str:
        return {"week": "week", "month": "month"}.get(self.kind, "period")

    def previous(self) -> Window:
        """The period before: the previous ISO week or month, else the same length just before."""
        p = self.period
        if p is not None:
            q = p.previous()
            return _named(q)
        return span(self.start - self.length, self.start)

    def history(self) -> list[Window]:
        """The periods of "the 4-week average": the reports' comparison periods (4 weeks, 3 months), or the 4
        windows of the same length before this one."""
        p = self.period
        if p is not None:
            return [_named(q) for q in comparison_periods(p)]
        return [span(self.start - (i + 1) * self.length, self.start - i * self.length) for i in range(HISTORY_WINDOWS)]

    @property
    def history_label(self) -> str:
        if self.kind == "month":
            return "3-month average"
        if self.kind == "week":
            return "4-week average"
        return f"average of the {HISTORY_WINDOWS} previous {self.days_label}"

    @property
    def days_label(self) -> str:
        days = self.length / DAY
        return f"{days:g}-day periods" if days == int(days) else "periods of the same length"

    def caption(self) -> str:
        """"2026-11-23 00:00 – 2026-11-30 00:00 UTC" (start inclusive, end exclusive)."""
        fmt = "%Y-%m-%d" if self.whole_days else "%Y-%m-%d %H:%M"
        return f"{self.start:{fmt}} – {self.end:{fmt}} UTC"


def _named(p: Period) -> Window:
    kind = "week" if p.kind == WEEKLY else "month"
    return Window(p.start, p.end, kind, p.label, (("period", p.label),))


def span(start: datetime, end: datetime) -> Window:
    fmt = "%Y-%m-%d" if floor_day(start) == start and floor_day(end) == end else "%Y-%m-%dT%H:%MZ"
    label = f"{start:{fmt}} – {end:{fmt}}"
    return Window(start, end, "custom", label, (("start", f"{start:{fmt}}"), ("end", f"{end:{fmt}}")))


def last_days(n: int, now: datetime) -> Window:
    """The last `n` whole UTC days, today (still being collected) included."""
    end = floor_day(now) + DAY
    return Window(end - n * DAY, end, "days", f"last {n} day{'s' if n != 1 else ''}", (("days", str(n)),))


@dataclass(frozen=True)
class Scope:
    """The period, filters and signal of one page view, with the caller's visibility and what was refused."""

    window: Window
    filters: dict[str, tuple[str, ...]]
    signal: str
    visible_teams: set[str] | None
    errors: tuple[str, ...] = ()
    extra: tuple[tuple[str, str], ...] = field(default=())  # page-specific parameters to keep (sort, page)

    @property
    def sees_all(self) -> bool:
        return self.visible_teams is None

    @property
    def usage_filters(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in self.filters.items() if v}

    @property
    def filtered(self) -> bool:
        return any(self.filters.values())

    def params(self, **overrides: object) -> list[tuple[str, str]]:
        """The query parameters that reproduce this view, with `overrides` (None drops a key)."""
        items: list[tuple[str, str]] = list(self.window.params)
        for key in FILTERS:
            items.extend((key, v) for v in self.filters.get(key, ()))
        if self.signal != default_signal():
            items.append(("signal", self.signal))
        items.extend(self.extra)
        period_keys = {"period", "days", "start", "end"}
        if period_keys & set(overrides):
            items = [(k, v) for k, v in items if k not in period_keys]
        out = [(k, v) for k, v in items if k not in overrides]
        for key, value in overrides.items():
            if value is None:
                continue
            if isinstance(value, list | tuple):
                out.extend((key, str(v)) for v in value)
            else:
                out.append((key, str(value)))
        return out

    def query(self, **overrides: object) -> str:
        return urlencode(self.params(**overrides))

    def with_window(self, window: Window) -> Scope:
        return replace(self, window=window)

    def with_filters(self, **filters: tuple[str, ...]) -> Scope:
        return replace(self, filters={**self.filters, **filters})


def parse_window(params: Mapping[str, str], now: datetime | None = None) -> tuple[Window, list[str]]:
    """The period of the query string (see the module), and messages for whatever was refused."""
    now = to_utc(now or timezone.now())
    errors: list[str] = []
    default = last_days(DEFAULT_DAYS, now)
    max_days = settings.GPUFINOPS_API_MAX_RANGE_DAYS
    start_raw, end_raw = (params.get("start") or "").strip(), (params.get("end") or "").strip()
    if start_raw or end_raw:
        try:
            start = parse_datetime_value("start", start_raw) if start_raw else None
            end = parse_datetime_value("end", end_raw) if end_raw else None
        except ValidationError as exc:
            return default, [f"Custom range: {_message(exc)} Showing the {default.label}."]
        if start is None or end is None:
            return default, [f"A custom range needs both a start and an end date. Showing the {default.label}."]
        if any(t.minute or t.second or t.microsecond for t in (start, end)):
            return default, ["A custom range must fall on whole hours (UTC): the ledger is kept in hourly buckets. "
                             f"Showing the {default.label}."]
        if end <= start:
            return default, [f"The end of a custom range must be after its start. Showing the {default.label}."]
        if end - start > timedelta(days=max_days):
            return default, [f"A range may span at most {max_days} days. Showing the {default.label}."]
        window = span(start, end)
        hourly = settings.GPUFINOPS_API_MAX_HOURLY_DAYS
        if not window.whole_days and window.length > timedelta(days=hourly):
            return default, [f"A range that does not start and end at midnight UTC may span at most {hourly} days "
                             f"(hour-level data). Showing the {default.label}."]
        return window, errors
    period_raw = (params.get("period") or "").strip()
    if period_raw:
        try:
            return _named(parse_period(period_raw)), errors
        except ValueError as exc:
            return default, [f"Period {period_raw[:40]!r}: {exc}. Showing the {default.label}."]
    days_raw = (params.get("days") or "").strip()
    if days_raw:
        if days_raw.isdigit() and 1 <= int(days_raw) <= max_days:
            return last_days(int(days_raw), now), errors
        return default, [f"days must be a whole number from 1 to {max_days}. Showing the {default.label}."]
    return default, errors


def parse_scope(params: Mapping[str, str], visible_teams: set[str] | None, *, now: datetime | None = None,
                keep: tuple[str, ...] = ()) -> Scope:
    """The scope of a page view; `keep` names page-specific parameters that links should carry on."""
    window, errors = parse_window(params, now)
    filters: dict[str, tuple[str, ...]] = {}
    for key in FILTERS:
        try:
            values = parse_text_list(params, key)
        except ValidationError as exc:
            errors.append(f"Filter {key}: {_message(exc)} The filter was left out.")
            continue
        if key == "team" and visible_teams is not None:
            hidden = [v for v in values if v not in visible_teams]
            if hidden:
                mine = ", ".join(sorted(visible_teams)) or "none yet"
                errors.append(f"Team {', '.join(hidden)} is not visible to you (you can see: {mine}); ask an "
                              "administrator to add you to a team (manage.py add_team_member TEAM USER).")
                values = [v for v in values if v in visible_teams]
        if values:
            filters[key] = tuple(values)
    signal = (params.get("signal") or "").strip() or default_signal()
    if signal not in SIGNALS:
        errors.append(f"Unknown signal {signal[:40]!r}; expected one of {', '.join(SIGNALS)}. "
                      f"Showing {default_signal()}.")
        signal = default_signal()
    extra = tuple((k, value) for k in keep if (value := params.get(k)))
    return Scope(window, filters, signal, visible_teams, tuple(errors), extra)


def period_choices(scope: Scope, now: datetime | None = None) -> list[tuple[str, str, bool]]:
    """(label, query string, current?) of the quick period links: this/last week and month, last 7/30 days."""
    now = to_utc(now or timezone.now())
    this_week = _named(week(now))
    this_month = _named(month(now))
    choices = [
        ("Last 7 days", last_days(7, now)), ("Last 30 days", last_days(30, now)),
        (f"This week ({this_week.label})", this_week),
        (f"Last week ({this_week.previous().label})", this_week.previous()),
        (f"This month ({this_month.label})", this_month),
        (f"Last month ({this_month.previous().label})", this_month.previous()),
    ]
    out = []
    for label, w in choices:
        params = dict(w.params)
        out.append((label, scope.query(**params), w.params == scope.window.params))
    return out
