"""The time rules: everything is UTC and the ledger is kept in hourly buckets `[h, h+1h)` (ledger.md "Time").

The one home of hour, day, week and month arithmetic; every app calls these instead of its own copy.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


def to_utc(value: datetime) -> datetime:
    """An aware UTC datetime; a naive one is taken to be UTC already."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def floor_hour(t: datetime) -> datetime:
    """The start of the hourly bucket containing `t`."""
    return to_utc(t).replace(minute=0, second=0, microsecond=0)


def ceil_hour(t: datetime) -> datetime:
    """`t` if it is on the hour, else the start of the next hour."""
    floor = floor_hour(t)
    return floor if floor == to_utc(t) else floor + HOUR


def hours_between(since: datetime, until: datetime) -> list[datetime]:
    """Every hourly bucket overlapping `[since, until)`."""
    hour, out = floor_hour(since), []
    while hour < until:
        out.append(hour)
        hour += HOUR
    return out


def midnight(day: date) -> datetime:
    """00:00 UTC of `day`."""
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def floor_day(t: datetime) -> datetime:
    """00:00 UTC of the day containing `t`."""
    return midnight(to_utc(t).date())


def is_midnight(t: datetime) -> bool:
    return to_utc(t) == floor_day(t)


def day_bounds(day: date) -> tuple[datetime, datetime]:
    """`[00:00, next 00:00)` UTC of `day`."""
    start = midnight(day)
    return start, start + DAY


def iso_week_start(t: datetime) -> datetime:
    """Monday 00:00 UTC of the ISO week containing `t`."""
    day = floor_day(t)
    return day - timedelta(days=day.weekday())


def month_start(t: datetime) -> datetime:
    """The first day of `t`'s month, 00:00 UTC."""
    u = to_utc(t)
    return datetime(u.year, u.month, 1, tzinfo=UTC)


def next_month(t: datetime) -> datetime:
    """The first day of the month after `t`'s, 00:00 UTC."""
    start = month_start(t)
    return datetime(start.year + start.month // 12, start.month % 12 + 1, 1, tzinfo=UTC)
