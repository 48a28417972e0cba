"""Query-parameter parsing for every /api/v1/ endpoint (interfaces.md, "Errors").

Each helper reads one parameter from a query dict (``request.query_params``) and either returns a
clean Python value or raises a DRF ``ValidationError`` keyed by the parameter's name, which
``apps.common.api.exception_handler`` turns into ``400 {"errors": {"<param>": ["message"]}}``.
Bad input therefore never reaches the ORM and never becomes a 500.

Times are ISO 8601 (``2026-11-23T00:00:00Z``, ``2026-11-23T00:00:00+00:00``) or plain dates
(``2026-11-23``, meaning midnight UTC). A time without an offset is read as UTC. Ranges are
half-open ``[start, end)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import overload

from django.conf import settings
from rest_framework.exceptions import ValidationError

# Years outside this window are certainly typos, and keeping them out avoids overflow in date arithmetic.
MIN_YEAR = 1970
MAX_YEAR = 9000
# Longest free-text value (cluster, team, namespace names: Kubernetes caps names at 253).
MAX_TEXT_LENGTH = 253
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")
# "2026-11-23T00:00:00+00:00" sent unencoded arrives as "...T00:00:00 00:00": put the plus back.
_UNENCODED_PLUS = re.compile(r" (\d{2}(:?\d{2})?)$")


def param_error(name: str, message: str) -> ValidationError:
    """The one error every helper raises: a 400 naming the parameter."""
    return ValidationError({name: [message]})


def _raw(params: Mapping[str, str], name: str) -> str | None:
    """The stripped value of a parameter, or None when it is absent or empty."""
    value = params.get(name)
    if value is None:
        return None
    value = str(value).strip()
    return value or None


def to_utc(value: datetime) -> datetime:
    """An aware UTC datetime; a naive one is taken to be UTC already."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def parse_datetime_value(name: str, raw: str) -> datetime:
    """Parses an ISO 8601 datetime or date (midnight UTC) into an aware UTC datetime."""
    text = _UNENCODED_PLUS.sub(r"+\1", raw.strip())
    if _CONTROL_CHARS.search(text) or len(text) > 64:
        raise param_error(name, "Enter an ISO 8601 date or datetime, e.g. 2026-11-23 or 2026-11-23T00:00:00Z.")
    parsed: datetime | None = None
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        try:
            parsed = datetime.combine(date.fromisoformat(text), datetime.min.time(), tzinfo=UTC)
        except ValueError:
            parsed = None
    elif "T" in text or " " in text:
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            parsed = None
    if parsed is None:
        raise param_error(name, "Enter an ISO 8601 date or datetime, e.g. 2026-11-23 or 2026-11-23T00:00:00Z.")
    try:
        parsed = to_utc(parsed)
    except (OverflowError, ValueError) as exc:
        raise param_error(name, "Date is out of range.") from exc
    if not MIN_YEAR <= parsed.year <= MAX_YEAR:
        raise param_error(name, f"Year must be between {MIN_YEAR} and {MAX_YEAR}.")
    return parsed


@overload
def parse_datetime(params: Mapping[str, str], name: str, *, default: datetime, required: bool = False) -> datetime: ...


@overload
def parse_datetime(
    params: Mapping[str, str], name: str, *, default: None = None, required: bool = False
) -> datetime | None: ...


def parse_datetime(
    params: Mapping[str, str], name: str, *, default: datetime | None = None, required: bool = False
) -> datetime | None:
    """Reads one time parameter; ``default`` when absent (400 when ``required``)."""
    raw = _raw(params, name)
    if raw is None:
        if required:
            raise param_error(name, "This parameter is required.")
        return default
    return parse_datetime_value(name, raw)


def today_utc(now: datetime | None = None) -> datetime:
    """Midnight UTC of the current day."""
    now = to_utc(now or datetime.now(UTC))
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def parse_range(
    params: Mapping[str, str],
    *,
    start_name: str = "start",
    end_name: str = "end",
    default_days: int = 7,
    max_days: int | None = None,
    whole_hours: bool = True,
    now: datetime | None = None,
) -> tuple[datetime, datetime]:
    """Reads a half-open ``[start, end)`` range.

    Defaults: ``end`` is today 00:00 UTC, ``start`` is ``default_days`` before ``end`` (so the
    default is the last ``default_days`` whole days). Checks that end > start, that the range is
    at most ``max_days`` (default ``settings.GPUFINOPS_API_MAX_RANGE_DAYS``) and, when
    ``whole_hours``, that both ends fall on an hour boundary, as the ledger's buckets do.
    """
    max_days = settings.GPUFINOPS_API_MAX_RANGE_DAYS if max_days is None else max_days
    start = parse_datetime(params, start_name)
    end = parse_datetime(params, end_name)
    if whole_hours:
        for name, value in ((start_name, start), (end_name, end)):
            if value is not None and (value.minute or value.second or value.microsecond):
                raise param_error(name, "Must fall on a whole hour (UTC): the ledger is kept in hourly buckets.")
    if end is None:
        end = today_utc(now) if start is None else start + timedelta(days=default_days)
    if start is None:
        start = end - timedelta(days=default_days)
    if end <= start:
        raise param_error(end_name, f"Must be after {start_name} (ranges are half-open [{start_name}, {end_name})).")
    if end - start > timedelta(days=max_days):
        raise param_error(end_name, f"The range may span at most {max_days} days.")
    return start, end


@overload
def parse_choice(params: Mapping[str, str], name: str, choices: Iterable[str], *, default: str) -> str: ...


@overload
def parse_choice(
    params: Mapping[str, str], name: str, choices: Iterable[str], *, default: None = None
) -> str | None: ...


def parse_choice(
    params: Mapping[str, str], name: str, choices: Iterable[str], *, default: str | None = None
) -> str | None:
    """Reads one value out of a fixed set."""
    choices = list(choices)
    raw = _raw(params, name)
    if raw is None:
        return default
    if raw not in choices:
        raise param_error(name, f"Unknown value {raw[:50]!r}; expected one of: {', '.join(choices)}.")
    return raw


def parse_list(
    params: Mapping[str, str],
    name: str,
    choices: Sequence[str],
    *,
    default: Sequence[str] = (),
    allow_empty: bool = False,
) -> list[str]:
    """Reads a comma-separated list of values out of a fixed set, keeping order and dropping repeats."""
    raw = _raw(params, name)
    if raw is None:
        if not default and not allow_empty:
            raise param_error(name, f"This parameter is required; choose from: {', '.join(choices)}.")
        return list(default)
    values: list[str] = []
    for item in raw.split(","):
        item = item.strip()
        if not item:
            raise param_error(name, "Empty item in the comma-separated list.")
        if item not in choices:
            raise param_error(name, f"Unknown value {item[:50]!r}; expected any of: {', '.join(choices)}.")
        if item not in values:
            values.append(item)
    return values


def parse_text(params: Mapping[str, str], name: str, *, max_length: int = MAX_TEXT_LENGTH) -> str | None:
    """Reads a free-text filter (a cluster or team name): bounded length, no control characters."""
    raw = _raw(params, name)
    if raw is None:
        return None
    if len(raw) > max_length:
        raise param_error(name, f"At most {max_length} characters.")
    if _CONTROL_CHARS.search(raw):
        raise param_error(name, "Control characters are not allowed.")
    return raw


def parse_int(
    params: Mapping[str, str],
    name: str,
    *,
    default: int | None = None,
    min_value: int | None = None,
    max_value: int | None = None,
) -> int | None:
    """Reads an integer within optional bounds."""
    raw = _raw(params, name)
    if raw is None:
        return default
    if not re.fullmatch(r"[+-]?\d{1,18}", raw):
        raise param_error(name, "Enter a whole number.")
    value = int(raw)
    if min_value is not None and value < min_value:
        raise param_error(name, f"Must be at least {min_value}.")
    if max_value is not None and value > max_value:
        raise param_error(name, f"Must be at most {max_value}.")
    return value


def parse_text_list(params: Mapping[str, str], name: str, *, max_values: int = 50) -> list[str]:
    """A repeatable free-text filter (`?team=a&team=b`, or `?team=a,b`): each value checked as `parse_text`."""
    getlist = getattr(params, "getlist", None)
    raw = getlist(name) if getlist else ([params[name]] if name in params else [])
    values: list[str] = []
    for item in raw:
        for part in str(item).split(","):
            part = part.strip()
            if not part:
                continue
            value = parse_text({name: part}, name)
            if value is not None and value not in values:
                values.append(value)
    if len(values) > max_values:
        raise param_error(name, f"At most {max_values} values.")
    return values
