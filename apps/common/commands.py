"""What every management command reads the same way: a time given as an option."""

from __future__ import annotations

from datetime import datetime

from django.core.management.base import CommandError
from rest_framework.exceptions import ValidationError

from apps.common.params import parse_datetime_value


def time_option(name: str, raw: str | None) -> datetime | None:
    """The option `--<name>` as an aware UTC time, read as the API reads times (an ISO 8601 time, UTC when it has
    no offset, or a date meaning midnight UTC); None when it is not given. A bad value is a one-line CommandError
    naming the option."""
    if raw is None or not str(raw).strip():
        return None
    try:
        return parse_datetime_value(name, str(raw))
    except ValidationError as exc:
        messages = exc.detail.get(name, exc.detail) if isinstance(exc.detail, dict) else exc.detail
        raise CommandError(f"--{name}: {' '.join(map(str, messages))}") from exc
