"""bench/forecast: a backtest of the budget forecast (apps/budgets/forecast.py) on the simulator's history.

    python bench/forecast.py [--days 63] [--seed 0] [--scenario demo] [--no-dra]

What it does: builds the scenario over `--days` days, takes each team's daily allocated GPU-hours from the oracle
(tests/oracle: what the ledger records for the simulator, pod by pod and hour by hour) as its daily spend (one
price per GPU-hour: the forecast is linear in the price, so the errors in percent are the same), and for every
ISO week after the first four (history) forecasts the week's end-of-period spend at each of its days 2-7 (00:00
UTC) from the days before, as `check_budgets` would. It prints, per horizon (days left), the mean absolute
percentage error, the bias, the share of actual week totals inside the printed range, and the naive forecast's
error (spent so far / days elapsed x 7, OCI's rule) for comparison; then every case outside its range.

`--no-dra` builds the demo without its DRA node group and HAMi node (`mixed.add_to_demo`, which runs through the
whole scenario: services from the start, jobs on a weekly rhythm). `tests/budgets/test_forecast_backtest.py` runs
`backtest` on the default demo (the add-on included) and asserts every case is inside its printed range.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
HISTORY_WEEKS = 4


@dataclass(frozen=True)
class Case:
    """One backtested forecast: a team's week seen with `days_left` days to go."""

    team: str
    week: datetime
    days_left: int
    actual: Decimal  # the week's total, exact
    spent: Decimal  # spent before the forecast
    expected: Decimal
    low: Decimal
    high: Decimal

    @property
    def inside(self) -> bool:
        """The week's total as printed (in cents) inside the printed range."""
        return self.low <= self.actual.quantize(Decimal("0.01")) <= self.high

    @property
    def error(self) -> float:
        return float((self.expected - self.actual) / self.actual)

    @property
    def naive_error(self) -> float:
        elapsed = 7 - self.days_left
        return float(self.spent / elapsed * 7 - self.actual) / float(self.actual)


def daily_spend(scenario: str, seed: int, days: int,
                with_dra: bool | None = None) -> tuple[datetime, dict[str, dict[date, Decimal]]]:
    """The scenario's first day (a Monday, `days` before the Monday on or before today) and each team's allocated
    GPU-hours per UTC day, from the oracle ledger."""
    from devtools.simulator.scenarios import build_scenario
    from tests.oracle.ledger import expected_ledger

    end = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    end -= timedelta(days=end.weekday())  # a Monday: whole ISO weeks
    start = end - timedelta(days=days)
    extra = {} if with_dra is None else {"with_dra": with_dra}
    sc = build_scenario(scenario, seed=seed, end=end, days=days, **extra)
    daily: dict[str, dict[date, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for row in expected_ledger(sc, start, end).rows:
        daily[row["team"]][row["hour"].date()] += Decimal(repr(round(row["allocated"], 6)))
    return start, {team: dict(d) for team, d in daily.items()}


def backtest(start: datetime, days: int, daily: dict[str, dict[date, Decimal]]) -> list[Case]:
    """Every team's every week after the first HISTORY_WEEKS, forecast at 00:00 of each of its days 2-7 from the
    days before it (apps.budgets.forecast, as the budgets call it)."""
    from apps.budgets.forecast import forecast

    cases = []
    weeks = [start + timedelta(days=7 * i) for i in range(HISTORY_WEEKS, days // 7)]
    for team, spend in sorted(daily.items()):
        for week in weeks:
            total = sum((spend.get((week + timedelta(days=i)).date(), Decimal(0)) for i in range(7)), Decimal(0))
            if total <= 0:
                continue
            for elapsed in range(1, 7):
                now = week + timedelta(days=elapsed)
                spent = sum((spend.get((week + timedelta(days=i)).date(), Decimal(0)) for i in range(elapsed)),
                            Decimal(0))
                history = {d: v for d, v in spend.items() if d < now.date()}
                f = forecast(start=week, end=week + timedelta(days=7), now=now, actual=spent, daily=history)
                cases.append(Case(team, week, 7 - elapsed, total, spent, f.expected, f.low, f.high))
    return cases


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=int, default=63)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scenario", default="demo")
    parser.add_argument("--no-dra", action="store_true", help="the demo without its DRA/HAMi add-on")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpufinops.settings")
    os.environ.setdefault("GPUFINOPS_DEVTOOLS", "1")
    import django

    django.setup()
    start, daily = daily_spend(args.scenario, args.seed, args.days, with_dra=False if args.no_dra else None)
    cases = backtest(start, args.days, daily)
    weeks = sorted({c.week for c in cases})
    print(f"scenario {args.scenario}{' (no DRA add-on)' if args.no_dra else ''} seed {args.seed}: {len(daily)} "
          f"teams, weeks {weeks[0]:%Y-%m-%d} .. {weeks[-1]:%Y-%m-%d} (after {HISTORY_WEEKS} weeks of history)")
    print(f"{'days left':>9} {'n':>4} {'MAPE':>7} {'bias':>7} {'in range':>9} {'naive MAPE':>11}")
    by_left: dict[int, list[Case]] = defaultdict(list)
    for c in cases:
        by_left[c.days_left].append(c)
    for left in sorted(by_left, reverse=True):
        rows = by_left[left]
        n = len(rows)
        print(f"{left:>9} {n:>4} {sum(abs(r.error) for r in rows) / n:>7.1%} {sum(r.error for r in rows) / n:>+7.1%} "
              f"{sum(r.inside for r in rows) / n:>9.0%} {sum(abs(r.naive_error) for r in rows) / n:>11.1%}")
    outside = [c for c in cases if not c.inside]
    print(f"all: {len(cases) - len(outside)} of {len(cases)} week totals inside their printed range")
    for c in outside:
        print(f"  outside: {c.team} week {c.week:%Y-%m-%d}, {c.days_left} days left: actual {c.actual:.2f}, "
              f"forecast {c.expected} [{c.low} .. {c.high}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
