"""The end-of-period spend forecast: the run rate with the weekly pattern, and a range (docs/numbers.md, "Forecast").

Pure: daily spends in, a forecast out. For a period `[start, end)` seen at `now`:

* **history**: the daily spend of the last `HISTORY_DAYS` (28) whole UTC days before `now`'s day (fewer when the
  ledger is younger: days before the first day with data are left out, and so is that first day itself when the
  window did not cut it, since collection began during it and it is partial);
* **run rate** r: the mean daily spend of the last 7 of those days (the level now);
* **weekly pattern** f(weekday): the mean spend on that weekday over the history divided by the history's mean
  day, used only when it makes the method's replayed one-day errors over the history smaller than a flat week
  does (1 for every weekday otherwise, and with under 14 days of history: one week cannot tell a pattern from
  noise, and four samples per weekday "find" one in plain noise);
* **forecast** = spent so far + Σ over the period's remaining days of r x f(weekday), the current day counted for
  its remaining hours only;
* **range**: calibrated on the method's own past errors, not on an assumed distribution. With n days left, the
  method is replayed over its history: at each day with 7 days before it, the forecast of the next m = ⌈n⌉ days'
  spend (those 7 days' run rate times the weekday factors) against what those days spent. The range is ± the
  largest of those errors, times n / m (m is capped by the history: a month's horizon on four weeks of history
  is scaled from the longest window the history holds). So it says: "as far off as this method has been over
  the same number of days in the last four weeks". The low end is never below what is spent already.

The old range (± 1.645 σ √n from one-day errors) assumed each day's error independent; the run rate's own error is
the same on every day left, so it grows with n, not √n, and `bench/forecast.py` found 80-92 % of week totals inside
it. A shift with no precedent in the history (a new workload starting after the forecast is made) is outside any
range built from the history: docs/numbers.md says so.

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
CENT = Decimal("0.01")
Z99 = 2.576  # a 99 % two-sided range for normal errors of the measured spread


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


def history_days(today: date, daily: Mapping[date, Decimal]) -> list[date]:
    """The whole days the forecast rests on: the HISTORY_DAYS before `today`, from the first day with data; that
    first day itself is left out when it is not the window's first (the ledger began during it: a partial day)."""
    window = [today - timedelta(days=i) for i in range(HISTORY_DAYS, 0, -1)]
    known = [d for d in window if d in daily]
    if not known:
        return []
    days = [d for d in window if d >= known[0]]
    if known[0] > window[0] and len(days) > 1:
        days = days[1:]
    return days


def weekly_factors(days: list[date], spend: Mapping[date, float]) -> dict[int, float]:
    """Each weekday's mean spend over the history divided by the history's mean day (1 with under 14 days)."""
    factor = dict.fromkeys(range(7), 1.0)
    mean = sum(spend[d] for d in days) / len(days) if days else 0.0
    if len(days) >= PATTERN_MIN_DAYS and mean > 0:
        for weekday in range(7):
            same = [spend[d] for d in days if d.weekday() == weekday]
            if same:
                factor[weekday] = (sum(same) / len(same)) / mean
    return factor


def pattern_helps(days: list[date], spend: Mapping[date, float], factor: Mapping[int, float]) -> bool:
    """Whether the weekly pattern makes the method's replayed one-day errors smaller than without it: four samples
    per weekday also "find" a pattern in plain noise, which would only add its noise to the forecast."""
    if all(f == 1.0 for f in factor.values()):
        return False
    flat = dict.fromkeys(range(7), 1.0)
    with_pattern = sum(e * e for e in past_errors(days, spend, factor, 1))
    return with_pattern < sum(e * e for e in past_errors(days, spend, flat, 1))


def past_errors(days: list[date], spend: Mapping[date, float], factor: Mapping[int, float], m: int) -> list[float]:
    """The method replayed over its own history: at each day with RUN_RATE_DAYS days before it and `m` days from it
    in the history, what those m days spent minus what the run rate of the 7 days before predicted for them."""
    errors = []
    for i in range(RUN_RATE_DAYS, len(days) - m + 1):
        level = sum(spend[d] for d in days[i - RUN_RATE_DAYS:i]) / RUN_RATE_DAYS
        window = days[i:i + m]
        errors.append(sum(spend[d] for d in window) - sum(level * factor[d.weekday()] for d in window))
    return errors


def spread(days: list[date], spend: Mapping[date, float], factor: Mapping[int, float], n: float) -> float:
    """Half the range with `n` days left: the largest past error over ⌈n⌉ days (or over the longest window the
    history holds, scaled up), times n / m. Under RUN_RATE_DAYS + 1 days of history nothing can be replayed: the
    largest distance of a day from the history's mean day, on every day left."""
    if n <= 0 or not days:
        return 0.0
    m = min(math.ceil(n), len(days) - RUN_RATE_DAYS)
    if m < 1:
        mean = sum(spend[d] for d in days) / len(days)
        return max(abs(spend[d] - mean) for d in days) * n
    errors = past_errors(days, spend, factor, m)
    rms = math.sqrt(sum(e * e for e in errors) / len(errors))
    return max(Z99 * rms, max(abs(e) for e in errors)) * n / m


def forecast(*, start: datetime, end: datetime, now: datetime, actual: Decimal,
             daily: Mapping[date, Decimal]) -> Forecast:
    """The forecast of `[start, end)` at `now` from `actual` (spent in `[start, now)`) and `daily` spends (any days;
    only the HISTORY_DAYS whole days before `now`'s day are read)."""
    days = history_days(now.date(), daily)
    if not days or now >= end:
        return Forecast(actual, actual, actual, actual, Decimal(0), len(days))
    spend = {d: float(daily.get(d, Decimal(0))) for d in days}
    recent = days[-RUN_RATE_DAYS:]
    rate = sum(spend[d] for d in recent) / len(recent)
    factor = weekly_factors(days, spend)
    if not pattern_helps(days, spend, factor):
        factor = dict.fromkeys(range(7), 1.0)
    remaining, t = 0.0, now
    while t < end:
        day_end = min(datetime.combine(t.date() + timedelta(days=1), datetime.min.time(), tzinfo=t.tzinfo), end)
        remaining += (day_end - t) / timedelta(days=1) * rate * factor[t.weekday()]
        t = day_end
    half = spread(days, spend, factor, (end - now) / timedelta(days=1))
    expected = float(actual) + remaining
    return Forecast(actual=actual, expected=_money(expected), low=max(_money(expected - half), actual),
                    high=_money(expected + half), run_rate=_money(rate), history_days=len(days))
