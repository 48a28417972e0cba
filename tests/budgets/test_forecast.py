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
    """The ledger began during 1 Nov (60 spent: collection started at 18:00), then four days of 240 (under 14 days:
    no pattern). The first day is partial and left out: the run rate is 240, not (60 + 4 x 240) / 5 = 204. At 6 Nov
    12:00, half of the 6th and 24 more days are left, 24.5 x 240 = 5880; spent 1020 -> 6900.00."""
    daily = {date(2026, 11, 1) + timedelta(days=i): Decimal(60 if i == 0 else 240) for i in range(5)}
    f = forecast(start=NOV, end=DEC, now=datetime(2026, 11, 6, 12, tzinfo=UTC), actual=Decimal("1020"), daily=daily)
    assert f.history_days == 4 and f.run_rate == Decimal("240.00")
    assert f.expected == Decimal("6900.00") and f.low == f.high == f.expected
    # A first day the 28-day window cut (the ledger is older than the window) is a whole day: kept.
    older = {date(2026, 10, 1) + timedelta(days=i): Decimal(240) for i in range(36)}
    assert forecast(start=NOV, end=DEC, now=datetime(2026, 11, 6, 12, tzinfo=UTC), actual=Decimal("1200"),
                    daily=older).history_days == 28


def test_the_range_is_the_methods_own_past_error_over_the_days_left():
    """Alternating 120 and 80 over the 28 days of history (no weekly pattern: each weekday averages 100). With 8
    days left the method is replayed over 8-day windows: the 7 days before each had 720 or 680 (a run rate of 720/7
    or 680/7), any 8 days spend 800, so every error is 800 - 8 x 720/7 or 800 - 8 x 680/7 = ±22.857 (rms 22.857).
    Half the range = max(2.576 x 22.857, 22.857) x 8/8 = 58.88. (The old ± 1.645 σ √n used the one-day spread.)
    With 10 days of history only 3 days can be replayed: a 3-day window, its errors scaled by 8/3."""
    daily = {date(2026, 10, 26) + timedelta(days=i): Decimal(80 if i % 2 else 120) for i in range(28)}
    now = datetime(2026, 11, 23, tzinfo=UTC)
    f = forecast(start=NOV, end=DEC, now=now, actual=Decimal("1500"), daily=daily)
    assert f.history_days == 28 and f.low < f.expected < f.high
    assert abs((f.high - f.expected) - Decimal("58.88")) <= Decimal("0.01")
    assert abs((f.expected - f.low) - Decimal("58.88")) <= Decimal("0.01")
    # Data from 12 Nov (the window cut nothing: 12 Nov is the ledger's first, partial day, left out): 10 days, so
    # 3-day windows after 7 days each, their errors scaled by 8/3: wider than the 8-day replay's.
    short = forecast(start=NOV, end=DEC, now=now, actual=Decimal("1500"),
                     daily={d: v for d, v in daily.items() if d >= date(2026, 11, 12)})
    assert short.history_days == 10 and short.high - short.expected > f.high - f.expected
    tight = forecast(start=NOV, end=DEC, now=datetime(2026, 11, 30, 23, tzinfo=UTC), actual=Decimal("3000"),
                     daily=daily)
    assert tight.low >= Decimal("3000")


def test_without_history_the_forecast_is_the_spend_and_after_the_end_too():
    f = forecast(start=NOV, end=DEC, now=datetime(2026, 11, 1, 5, tzinfo=UTC), actual=Decimal("12"), daily={})
    assert (f.expected, f.low, f.high, f.history_days) == (Decimal("12"), Decimal("12"), Decimal("12"), 0)


def test_a_weekly_pattern_found_in_noise_is_not_used():
    """Four weeks of 100 a day but 105 and 95 on the first Monday and Tuesday: the weekday means "find" a pattern
    (Monday 101.25, Tuesday 98.75) that is only that noise. Replayed over the history it makes errors (±1.25 on
    every later Monday and Tuesday) where a flat week makes none, so it is left out: Monday 23 Nov is forecast at
    100.00, not 101.25. Its range is ± 0.71: in the replay, the run rate of the 7 days before 3 Nov (695 / 7 =
    99.29, the 95 in it) was 0.71 off that day's 100. The real pattern of 100 a weekday and 20 a weekend day is
    kept (first test)."""
    daily = {date(2026, 10, 26) + timedelta(days=i): Decimal({0: "105", 1: "95"}.get(i, "100")) for i in range(28)}
    monday = datetime(2026, 11, 23, tzinfo=UTC)
    f = forecast(start=monday, end=monday + timedelta(days=1), now=monday, actual=Decimal(0), daily=daily)
    assert (f.expected, f.low, f.high) == (Decimal("100.00"), Decimal("99.29"), Decimal("100.71"))
