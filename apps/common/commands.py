"""What every management command reads the same way: a time given as an option; the pruning twins' `--keep-days`."""

from __future__ import annotations

from datetime import datetime

from django.core.management.base import BaseCommand, CommandError, CommandParser
from rest_framework.exceptions import ValidationError

from apps.common.params import parse_datetime_value
from apps.common.retention import FULL_RESOLUTION_DAYS


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


class PruneCommand(BaseCommand):
    """The command twin of a task that thins snapshot history: `--keep-days N` (at least 1; default the days kept
    at full resolution) handed to `prune`, and one line saying how many collections were thinned."""

    thinned = "collections"  # what `prune` counts, as the line names it

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--keep-days", type=int, default=FULL_RESOLUTION_DAYS)

    def prune(self, keep_days: int) -> int:
        raise NotImplementedError

    def handle(self, *args: object, keep_days: int, **options: object) -> None:
        if keep_days < 1:
            raise CommandError("--keep-days must be at least 1")
        self.stdout.write(f"thinned {self.prune(keep_days)} {self.thinned}")
