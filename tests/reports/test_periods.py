"""Report periods: ISO weeks and calendar months, UTC; final only when every hour of every cluster is final."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from apps.reports.periods import last_complete, parse_period, period_state
from apps.usage.models import Bucket
from tests.reports.conftest import END, START, fill


def at(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_periods_are_iso_weeks_and_calendar_months():
    w47 = parse_period("2026-W47")
    assert (w47.start, w47.end, w47.kind, w47.hours) == (at(2026, 11, 16), at(2026, 11, 23), "weekly", 168)
    assert parse_period("2026-W53").start == at(2026, 12, 28)  # 2026 has 53 ISO weeks
    assert parse_period("2027-W01").start == at(2027, 1, 4)
    assert parse_period("2026-W53").following().label == "2027-W01"
    assert parse_period("2027-W01").previous().label == "2026-W53"
    feb = parse_period("2026-02")
    assert (feb.start, feb.end, feb.hours) == (at(2026, 2, 1), at(2026, 3, 1), 672)
    assert parse_period("2026-12").end == at(2027, 1, 1)
    assert parse_period("2026-01").previous(3).label == "2025-10"
    assert parse_period("2026-W01").billing_month() == "2026-01"  # Mon 29 Dec 2025 .. Sun 4 Jan 2026
    for bad in ("2025-W53", "2026-W00", "2026-13", "2026-00", "2026-W5", "W47", "", "2026-11-01", "1800-01"):
        with pytest.raises(ValueError):
            parse_period(bad)


def test_the_due_period_is_the_last_one_that_has_ended():
    assert last_complete("weekly", at(2026, 11, 23, 0, 30)).label == "2026-W47"
    assert last_complete("weekly", at(2026, 11, 22, 23, 59)).label == "2026-W46"
    assert last_complete("monthly", at(2026, 12, 1, 0, 30)).label == "2026-11"
    assert last_complete("monthly", at(2027, 1, 15)).label == "2026-12"


def test_a_period_is_final_only_when_every_hour_of_every_cluster_is_final_and_ok(prod):
    week = parse_period("2026-W47")
    assert period_state(week, END).reason() == "no cluster was collecting in this week"
    fill(prod, START + timedelta(hours=2), END)
    state = period_state(week, END + timedelta(hours=1))
    assert not state.final and state.collected == 166
    assert state.reason() == "prod: 166 of 168 hours final (2 not collected)"
    fill(prod, START, START + timedelta(hours=2))
    assert period_state(week, END).final
    Bucket.objects.filter(hour=START + timedelta(hours=5)).update(status="failed")
    Bucket.objects.filter(hour=START + timedelta(hours=6)).update(state="provisional")
    state = period_state(week, END)
    assert state.reason() == "prod: 166 of 168 hours final (1 provisional, 1 failed)"
    assert round(state.ratio, 4) == round(166 / 168, 4)
    # Before the end of the week it is not over, however complete its hours so far.
    assert period_state(week, START + timedelta(hours=50)).reason() == "the week is not over (50 of 168 hours so far)"
    # A cluster added after the period did not exist in it.
    later = type(prod).objects.create(name="later")
    fill(later, END + timedelta(days=1), END + timedelta(days=1, hours=1))
    assert [c.cluster for c in period_state(week, END).clusters] == ["prod"]
