"""The one period rule: which `[start, end)` a period names, for every page, the API, the findings, the reports and
the CSV file names alike.

A period is named in the query string one way (the pages and the API read the same parameters):

* `period=2026-W48`: an ISO week, Monday 00:00 to Monday 00:00 UTC; `period=2026-11`: a calendar month;
* `days=N`: the last N whole UTC days, today (still being collected) included: `[today - N + 1, tomorrow)`;
* `start=...&end=...`: custom, half-open, UTC dates or times on the hour (one of them alone: DEFAULT_DAYS from or
  up to it);
* nothing: the last DEFAULT_DAYS days, as `days=DEFAULT_DAYS`.

Only one way at a time: `period` with `days`, or either with `start`/`end`, is refused (a silently ignored
parameter is a surprise). `read_window` refuses bad input with a `PeriodError` naming the parameter (the API turns
it into a 400); `page_window` shows the default instead and says why (a page never fails on its query string).

The reports' periods are the weeks and months (`Period`): the same bounds as the e-mail. Nothing else computes
window bounds: `tests/foundation/test_one_period_rule.py` fails on window arithmetic outside this module.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from rest_framework.exceptions import ValidationError

from apps.common.params import param_error, parse_datetime_value
from apps.common.timeutils import DAY, HOUR, floor_day, iso_week_start, month_start, next_month, to_utc

WEEKLY = "weekly"
MONTHLY = "monthly"
KINDS = (WEEKLY, MONTHLY)
DEFAULT_DAYS = 7
HISTORY_WINDOWS = 4  # "the 4-week average": the 4 windows before (3 months for a month, as the reports do)
# Buckets of the charts: hours up to HOUR_BUCKET_DAYS, days up to DAY_BUCKET_DAYS, ISO weeks beyond.
HOUR_BUCKET_DAYS = 3
DAY_BUCKET_DAYS = 92
PERIOD_KEYS = ("period", "days", "start", "end")
_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")
_MONTH = re.compile(r"^(\d{4})-(\d{2})$")


# ---- The reports' periods: ISO weeks and calendar months ----


@dataclass(frozen=True, order=True)
class Period:
    """A report period: `[start, end)` UTC."""

    start: datetime
    end: datetime
    kind: str
    label: str

    @property
    def hours(self) -> int:
        return int((self.end - self.start) / HOUR)

    @property
    def noun(self) -> str:
        return "week" if self.kind == WEEKLY else "month"

    def previous(self, n: int = 1) -> Period:
        """The period `n` before this one."""
        p = self
        for _ in range(n):
            p = period_containing(self.kind, p.start - HOUR)
        return p

    def following(self) -> Period:
        return period_containing(self.kind, self.end)

    def billing_month(self) -> str:
        """The calendar month a week rolls into (the month of its last day), for the e-mail's note."""
        return f"{self.end - DAY:%Y-%m}"


def week(t: datetime) -> Period:
    start = iso_week_start(t)
    year, number, _ = start.date().isocalendar()
    return Period(start, start + 7 * DAY, WEEKLY, f"{year}-W{number:02d}")


def month(t: datetime) -> Period:
    start = month_start(t)
    return Period(start, next_month(start), MONTHLY, f"{start:%Y-%m}")


def period_containing(kind: str, t: datetime) -> Period:
    return week(t) if kind == WEEKLY else month(t)


def last_complete(kind: str, now: datetime) -> Period:
    """The last period of `kind` that has ended by `now`."""
    return period_containing(kind, period_containing(kind, to_utc(now)).start - HOUR)


def comparison_periods(period: Period) -> list[Period]:
    """The previous 4 weeks (or 3 months): the average a period is compared with."""
    n = HISTORY_WINDOWS if period.kind == WEEKLY else 3
    return [period.previous(i) for i in range(1, n + 1)]


def parse_period(text: str) -> Period:
    """`2026-W47` (ISO week) or `2026-11` (calendar month); ValueError with a readable reason otherwise."""
    text = (text or "").strip()
    if m := _WEEK.match(text):
        try:
            monday = date.fromisocalendar(int(m[1]), int(m[2]), 1)
        except ValueError as exc:
            raise ValueError(f"{text!r} is not an ISO week (weeks run 01 to 52 or 53)") from exc
        if not 1970 <= monday.year <= 9000:
            raise ValueError("year out of range")
        return week(datetime(monday.year, monday.month, monday.day, tzinfo=UTC))
    if m := _MONTH.match(text):
        year, mon = int(m[1]), int(m[2])
        if not 1 <= mon <= 12 or not 1970 <= year <= 9000:
            raise ValueError(f"{text!r} is not a month (YYYY-MM, 01 to 12)")
        return month(datetime(year, mon, 1, tzinfo=UTC))
    raise ValueError("a period is an ISO week like 2026-W47 or a month like 2026-11")


# ---- Windows: any named range, the reports' periods among them ----


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
    def days(self) -> float:
        return self.length / DAY

    @property
    def hours(self) -> int:
        return int(self.length / HOUR)

    @property
    def whole_days(self) -> bool:
        return floor_day(self.start) == self.start and floor_day(self.end) == self.end

    @property
    def bucket(self) -> str:
        """The charts' bucket: hour for short ranges (or ranges not on midnight), day, or ISO week."""
        if self.days <= HOUR_BUCKET_DAYS or not self.whole_days:
            return "hour"
        return "day" if self.days <= DAY_BUCKET_DAYS else "week"

    @property
    def noun(self) -> str:
        return {"week": "week", "month": "month"}.get(self.kind, "period")

    def previous(self) -> Window:
        """The period before: the previous ISO week or month, else the same length just before."""
        p = self.period
        if p is not None:
            return named(p.previous())
        return span(self.start - self.length, self.start)

    def history(self) -> list[Window]:
        """The periods of "the 4-week average": the reports' comparison periods (4 weeks, 3 months), or the 4
        windows of the same length before this one."""
        p = self.period
        if p is not None:
            return [named(q) for q in comparison_periods(p)]
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
        return f"{self.days:g}-day periods" if self.days == int(self.days) else "periods of the same length"

    def dates(self) -> list[date]:
        """The UTC days the window touches, in order."""
        first, last = self.start.date(), (self.end - HOUR).date()
        return [first + timedelta(days=n) for n in range((last - first).days + 1)]

    def last(self, days: int) -> Window:
        """At most the last `days` days of this window (a history limit), itself when it is shorter."""
        start = max(self.start, self.end - days * DAY)
        return self if start == self.start else span(start, self.end)

    def caption(self) -> str:
        """"2026-11-23 – 2026-11-30 UTC" (start inclusive, end exclusive; times when not on midnight)."""
        fmt = "%Y-%m-%d" if self.whole_days else "%Y-%m-%d %H:%M"
        return f"{self.start:{fmt}} – {self.end:{fmt}} UTC"

    @property
    def slug(self) -> str:
        """The bounds in a file name: `2026-11-23_2026-11-30` (`...T0600Z` when not on midnight)."""
        fmt = "%Y-%m-%d" if self.whole_days else "%Y-%m-%dT%H%MZ"
        return f"{self.start:{fmt}}_{self.end:{fmt}}"

    def filename(self, *parts: str, ext: str = "csv") -> str:
        """`gpufinops-<parts>-<slug>.<ext>`: every CSV a page or the API writes is named by its bounds."""
        safe = [re.sub(r"[^A-Za-z0-9_.-]+", "_", p).strip("_") for p in ("gpufinops", *parts)]
        return f"{'-'.join(s for s in safe if s)}-{self.slug}.{ext}"


def named(p: Period) -> Window:
    """The window of a report period."""
    kind = "week" if p.kind == WEEKLY else "month"
    return Window(p.start, p.end, kind, p.label, (("period", p.label),))


def span(start: datetime, end: datetime) -> Window:
    """A custom window."""
    start, end = to_utc(start), to_utc(end)
    fmt = "%Y-%m-%d" if floor_day(start) == start and floor_day(end) == end else "%Y-%m-%dT%H:%MZ"
    label = f"{start:{fmt}} – {end:{fmt}}"
    return Window(start, end, "custom", label, (("start", f"{start:{fmt}}"), ("end", f"{end:{fmt}}")))


@dataclass(frozen=True)
class DaySplit:
    """`[start, end)` cut where the day rollups can answer: the whole UTC days inside it (`days`, None when there
    are none) and the hours before and after them (`hours`: one or two half-open ranges, partial days)."""

    days: tuple[datetime, datetime] | None
    hours: tuple[tuple[datetime, datetime], ...]


def split_days(start: datetime, end: datetime) -> DaySplit:
    """The whole days of `[start, end)` and the partial days at its edges (a ranking reads the day rollups for
    the first and the hour rollups for the second, so its figures equal the ledger's exactly)."""
    start, end = to_utc(start), to_utc(end)
    first = start if floor_day(start) == start else floor_day(start) + DAY
    last = floor_day(end)
    if first >= last:
        return DaySplit(None, ((start, end),) if start < end else ())
    edges = tuple((a, b) for a, b in ((start, first), (last, end)) if a < b)
    return DaySplit((first, last), edges)


def last_days(n: int, now: datetime) -> Window:
    """The last `n` whole UTC days, today (still being collected) included."""
    end = floor_day(now) + DAY
    return Window(end - n * DAY, end, "days", f"last {n} day{'s' if n != 1 else ''}", (("days", str(n)),))


def default_window(now: datetime) -> Window:
    """What a page or the API shows when no period is named."""
    return last_days(DEFAULT_DAYS, now)


class PeriodError(ValueError):
    """A period parameter that cannot be read; `param` names it."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param
        self.message = message


def _text(params: Mapping[str, str], name: str) -> str:
    return str(params.get(name) or "").strip()


def read_window(params: Mapping[str, str], now: datetime, *, max_days: int,
                max_hourly_days: int | None = None) -> Window:
    """The window the query string names (see the module); PeriodError for anything it cannot honour.

    `max_days` bounds every window; `max_hourly_days`, when given, bounds custom windows that do not start and end
    at midnight (they are answered hour by hour)."""
    now = to_utc(now)
    given = [k for k in PERIOD_KEYS if _text(params, k)]
    if "period" in given and "days" in given:
        raise PeriodError("days", "Name a period one way: period or days, not both.")
    if {"start", "end"} & set(given) and {"period", "days"} & set(given):
        other = "period" if "period" in given else "days"
        raise PeriodError(other, f"Name a period one way: {other} or start/end, not both.")
    if "period" in given:
        try:
            window = named(parse_period(_text(params, "period")))
        except ValueError as exc:
            raise PeriodError("period", f"{exc}.") from exc
    elif "days" in given:
        raw = _text(params, "days")
        if not (raw.isdigit() and 1 <= int(raw) <= max_days):
            raise PeriodError("days", f"Enter a whole number of days from 1 to {max_days}.")
        window = last_days(int(raw), now)
    elif given:
        window = _custom(params, max_hourly_days)
    else:
        window = default_window(now)
    if window.length > max_days * DAY:
        raise PeriodError("end" if window.kind == "custom" else "period", f"A period may span at most {max_days} days.")
    return window


def _custom(params: Mapping[str, str], max_hourly_days: int | None) -> Window:
    try:
        start = parse_datetime_value("start", _text(params, "start")) if _text(params, "start") else None
        end = parse_datetime_value("end", _text(params, "end")) if _text(params, "end") else None
    except ValidationError as exc:  # the parser names the parameter
        detail = exc.detail
        if isinstance(detail, dict) and detail:
            name, messages = next(iter(detail.items()))
            text = " ".join(str(m) for m in messages) if isinstance(messages, list) else str(messages)
            raise PeriodError(str(name), text) from exc
        raise PeriodError("start", str(detail)) from exc
    for name, value in (("start", start), ("end", end)):
        if value is not None and (value.minute or value.second or value.microsecond):
            raise PeriodError(name, "Must fall on a whole hour (UTC): the ledger is kept in hourly buckets.")
    if end is None:
        assert start is not None
        end = start + DEFAULT_DAYS * DAY
    if start is None:
        start = end - DEFAULT_DAYS * DAY
    if end <= start:
        raise PeriodError("end", "Must be after start (ranges are half-open [start, end)).")
    window = span(start, end)
    if max_hourly_days is not None and not window.whole_days and window.length > max_hourly_days * DAY:
        raise PeriodError("end", f"A range that does not start and end at midnight UTC may span at most "
                                 f"{max_hourly_days} days (hour-level data).")
    return window


def page_window(params: Mapping[str, str], now: datetime, *, max_days: int,
                max_hourly_days: int | None = None) -> tuple[Window, list[str]]:
    """`read_window` for a page: the default window and a message saying why, instead of an error."""
    try:
        return read_window(params, now, max_days=max_days, max_hourly_days=max_hourly_days), []
    except PeriodError as exc:
        default = default_window(now)
        return default, [f"{exc.param}: {exc.message} Showing the {default.label}."]


def quick_windows(now: datetime) -> list[tuple[str, Window]]:
    """The quick period links every page offers: last 7 and 30 days, this and last week, this and last month."""
    this_week, this_month = named(week(now)), named(month(now))
    return [
        ("Last 7 days", last_days(7, now)), ("Last 30 days", last_days(30, now)),
        (f"This week ({this_week.label})", this_week),
        (f"Last week ({this_week.previous().label})", this_week.previous()),
        (f"This month ({this_month.label})", this_month),
        (f"Last month ({this_month.previous().label})", this_month.previous()),
    ]


def api_window(params: Mapping[str, str], now: datetime, *, max_days: int,
               max_hourly_days: int | None = None) -> Window:
    """`read_window` for the API: a 400 naming the parameter instead of a PeriodError."""
    try:
        return read_window(params, now, max_days=max_days, max_hourly_days=max_hourly_days)
    except PeriodError as exc:
        raise param_error(exc.param, exc.message) from exc
