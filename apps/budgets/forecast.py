"""The end-of-period spend forecast: the run rate with the weekly pattern, and a range (docs/numbers.md, "Forecast").

Pure: daily spends in, a forecast out. For a period `[start, end)` seen at `now`:

* **history**: the daily spend of the last `HISTORY_DAYS` (28) whole UTC days before `now`'s day (fewer when the
  ledger is younger; days before the first day with data are left out);
* **run rate** r: the mean daily spend of the last 7 of those days (the level now);
* **weekly pattern** f(weekday): the mean spend on that weekday over the history divided by the history's mean
  day (1 for every weekday with under 14 days of history: one week cannot tell a pattern from noise);
* **forecast** = spent so far + Σ over the period's remaining days of r x f(weekday), the current day counted for
  its remaining hours only;
* **range**: σ is the spread of the method's one-day-ahead errors over the history (each day against the run rate
  of the 7 days before it, times f); the remaining n days add ± z σ √n (z = 1.645: a 90 % interval for independent
  normal errors, a simplification `bench/forecast.py` measures: 88-100 % coverage on the demo). The low end is never
  below what is spent already.

Without any history the forecast is what is spent so far, with no range (`history_days` = 0 says so).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal

HISTORY_DAYS = 28
RUN_RATE_DAYS = 7
PATTERN_MIN_DAYS = 14
Z90 = 1.645
CENT = Decimal("0.01")


@dataclass(frozen=True)
class Forecast:
    actual: Decimal  # spent in the period up to `now`
    expected: Decimal  # the forecast end-of-period spend
    low: Decimal
    high: Decimal
    run_rate: Decimal  # per day, before the weekly pattern
    history_days: int  # whole days the forecast rests on

    def as_dict(self) -> dict[str, object]:
        return {"actual": self.actual, "expected": self.expected, "low": self.low, "high": self.high,
                "run_rate_per_day": self.run_rate, "history_days": self.history_days}


def _money(value: float) -> Decimal:
    return Decimal(repr(value)).quantize(CENT, rounding=ROUND_HALF_EVEN)


def _out_of_sample_sigma(days: list[date], spend: Mapping[date, float], factor: Mapping[int, float]) -> float:
    """The spread of the one-day-ahead errors the method made over its own history: each day against the run
    rate of the RUN_RATE_DAYS before it (so the level's own drift is in it, not only the noise around today's)."""
    errors = []
    for i in range(RUN_RATE_DAYS, len(days)):
        before = days[i - RUN_RATE_DAYS:i]
        level = sum(spend[d] for d in before) / len(before)
        errors.append(spend[days[i]] - level * factor[days[i].weekday()])
    if len(errors) < 2:  # too short a history to measure the method: the spread of the days themselves
        mean = sum(spend[d] for d in days) / len(days)
        errors = [spend[d] - mean for d in days]
    return math.sqrt(sum(e * e for e in errors) / len(errors)) if errors else 0.0


def forecast(*, start: datetime, end: datetime, now: datetime, actual: Decimal,
             daily: Mapping[date, Decimal]) -> Forecast:
    """The forecast of `[start, end)` at `now` from `actual` (spent in `[start, now)`) and `daily` spends (any days;
    only the HISTORY_DAYS whole days before `now`'s day are read)."""
    today = now.date()
    days = [today - timedelta(days=i) for i in range(HISTORY_DAYS, 0, -1)]
    known = [d for d in days if d in daily]
    days = [d for d in days if d >= known[0]] if known else []  # from the first day with data
    if not days or now >= end:
        return Forecast(actual, actual, actual, actual, Decimal(0), len(days))
    spend = {d: float(daily.get(d, Decimal(0))) for d in days}
    recent = days[-RUN_RATE_DAYS:]
    rate = sum(spend[d] for d in recent) / len(recent)
    mean = sum(spend.values()) / len(days)
    factor = dict.fromkeys(range(7), 1.0)
    if len(days) >= PATTERN_MIN_DAYS and mean > 0:
        for weekday in range(7):
            same = [spend[d] for d in days if d.weekday() == weekday]
            if same:
                factor[weekday] = (sum(same) / len(same)) / mean
    sigma = _out_of_sample_sigma(days, spend, factor)
    remaining, t = 0.0, now
    while t < end:
        day_end = min(datetime.combine(t.date() + timedelta(days=1), datetime.min.time(), tzinfo=t.tzinfo), end)
        remaining += (day_end - t) / timedelta(days=1) * rate * factor[t.weekday()]
        t = day_end
    n = (end - now) / timedelta(days=1)
    spread = Z90 * sigma * math.sqrt(n)
    expected = float(actual) + remaining
    low = max(float(actual), expected - spread)
    return Forecast(actual=actual, expected=_money(expected), low=max(_money(low), actual),
                    high=_money(expected + spread), run_rate=_money(rate), history_days=len(days))
