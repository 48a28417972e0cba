"""Every command reads a time option as the API reads a time parameter (apps.common.commands.time_option)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.common.commands import time_option
from apps.inventory.models import Cluster


@pytest.mark.parametrize(("raw", "expected"), [
    ("2026-11-23T10:00:00Z", datetime(2026, 11, 23, 10, tzinfo=UTC)),
    ("2026-11-23T12:00:00+02:00", datetime(2026, 11, 23, 10, tzinfo=UTC)),
    ("2026-11-23T10:00:00", datetime(2026, 11, 23, 10, tzinfo=UTC)),  # no offset: UTC
    ("2026-11-23", datetime(2026, 11, 23, tzinfo=UTC)),  # a date: midnight UTC
    (None, None),
    ("", None),
])  # fmt: skip
def test_it_reads_iso_times_and_dates_as_utc(raw, expected):
    assert time_option("now", raw) == expected


@pytest.mark.parametrize("raw", ["yesterday", "2026-13-01", "2026-11-23T25:00:00Z", "0001-01-01"])
def test_a_bad_time_is_one_line_naming_the_option(raw):
    with pytest.raises(CommandError, match=r"^--since: "):
        time_option("since", raw)


@pytest.mark.django_db
@pytest.mark.parametrize("args", [
    ["notify_findings", "--now", "soon"],
    ["send_reports", "--now", "soon"],
    ["rebuild_findings", "--since", "last week"],
    ["collect", "--cluster", "c", "--since", "2026-11-23", "--until", "later"],
    ["export_focus", "--start", "2026-11-01", "--end", "December"],
])  # fmt: skip
def test_the_commands_refuse_a_bad_time_naming_the_option(args):
    Cluster.objects.create(name="c")
    with pytest.raises(CommandError, match=r"^--(now|since|until|end): "):
        call_command(*args)
