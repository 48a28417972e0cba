"""The forecast (apps/budgets/forecast.py): run rate with the weekly pattern, and its range; hand-computed."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from apps.budgets.forecast import forecast

NOV = datetime(2026, 11, 1, tzinfo=UTC)
DEC = datetime(2026, 12, 1, tzinfo=UTC)


def _weeks(first: date, days: int, weekday: str, weekend: str) -> dict[date, Decimal]:
    return {first + timedelta(days=i): Decimal(weekday if (first + timedelta(days=i)).weekday() < 5 else weekend)
            for i in range(days)}


def test_the_weekly_pattern_carries_the_run_rate_over_the_days_left():
    """Four weeks of 100 a weekday and 20 a weekend day: the run rate is 540/7 a day, the pattern gives each
    weekday 100 and each weekend day 20 again. Seen at Monday 23 Nov 00:00 with 1800 spent, 8 days are left: 6
    weekdays and 2 weekend days, 640; no residual, so no spread: 2440.00 exactly."""
    now = datetime(2026, 11, 23, tzinfo=UTC)
    f = forecast(start=NOV, end=DEC, now=now, actual=Decimal("1800"), daily=_weeks(date(2026, 10, 26), 28, "100", "20"))
    assert f.history_days == 28 and f.run_rate == Decimal("77.14")
    assert (f.expected, f.low, f.high) == (Decimal("2440.00"), Decimal("2440.00"), Decimal("2440.00"))


def test_a_partial_day_counts_for_its_hours_left_and_a_short_history_has_no_pattern():
    """Five days of 240 (under 14 days: no pattern): at 6 Nov 12:00, half of the 6th and 24 more days are left,
    24.5 x 240 = 5880; spent 1320 -> 7200.00."""
    daily = {date(2026, 11, 1) + timedelta(days=i): Decimal(240) for i in range(5)}
    f = forecast(start=NOV, end=DEC, now=datetime(2026, 11, 6, 12, tzinfo=UTC), actual=Decimal("1320"), daily=daily)
    assert f.history_days == 5 and f.expected == Decimal("7200.00") and f.low == f.high == f.expected


def test_noise_widens_the_range_and_the_low_end_never_goes_under_the_spend():
    """Alternating 80 and 120 over 14 days (no weekly pattern: each weekday averages 100): the run rate of the
    last 7 days is (4 x 80 + 3 x 120)/7 or (3 x 80 + 4 x 120)/7; σ > 0 gives a range around the forecast."""
    daily = {date(2026, 11, 9) + timedelta(days=i): Decimal(80 if i % 2 else 120) for i in range(14)}
    now = datetime(2026, 11, 23, tzinfo=UTC)
    f = forecast(start=NOV, end=DEC, now=now, actual=Decimal("1500"), daily=daily)
    assert f.low < f.expected < f.high
    assert f.high - f.expected > Decimal(40)  # 1.645 x σ (≈ 20) x √8 ≈ 93
    tight = forecast(start=NOV, end=DEC, now=datetime(2026, 11, 30, 23, tzinfo=UTC), actual=Decimal("3000"),
                     daily=daily)
    assert tight.low >= Decimal("3000")


def test_without_history_the_forecast_is_the_spend_and_after_the_end_too():
    f = forecast(start=NOV, end=DEC, now=datetime(2026, 11, 1, 5, tzinfo=UTC), actual=Decimal("12"), daily={})
    assert (f.expected, f.low, f.high, f.history_days) == (Decimal("12"), Decimal("12"), Decimal("12"), 0)
