"""bench/forecast: a backtest of the budget forecast (apps/budgets/forecast.py) on the simulator's history.

    python bench/forecast.py [--days 63] [--seed 0] [--scenario demo]

What it does: builds the scenario over `--days` days, takes each team's daily allocated GPU-hours from the oracle
(tests/oracle: what the ledger records for the simulator, pod by pod and hour by hour) as its daily spend (one
price per GPU-hour: the forecast is linear in the price, so the errors in percent are the same), and for every
ISO week after the first four (history) forecasts the week's end-of-period spend at each of its days 2-7 (00:00
UTC) from the days before, as `check_budgets` would. It prints, per horizon (days left), the mean absolute
percentage error, the bias, the share of actual week totals inside the printed 90 % range, and the naive forecast's
error (spent so far / days elapsed x 7, OCI's rule) for comparison. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=int, default=63)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scenario", default="demo")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpufinops.settings")
    os.environ.setdefault("GPUFINOPS_DEVTOOLS", "1")
    import django

    django.setup()
    from apps.budgets.forecast import forecast
    from devtools.simulator.scenarios import build_scenario
    from tests.oracle.ledger import expected_ledger

    end = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    end -= timedelta(days=end.weekday())  # a Monday: whole ISO weeks
    start = end - timedelta(days=args.days)
    sc = build_scenario(args.scenario, seed=args.seed, end=end, days=args.days)
    led = expected_ledger(sc, start, end)
    daily: dict[str, dict[date, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for row in led.rows:
        daily[row["team"]][row["hour"].date()] += Decimal(repr(round(row["allocated"], 6)))
    weeks = [start + timedelta(days=7 * i) for i in range(4, args.days // 7)]
    stats: dict[int, list[tuple[float, float, bool, float]]] = defaultdict(list)
    for _team, days in sorted(daily.items()):
        for week in weeks:
            actual_total = sum((days.get((week + timedelta(days=i)).date(), Decimal(0)) for i in range(7)),
                               Decimal(0))
            if actual_total <= 0:
                continue
            for elapsed in range(1, 7):
                now = week + timedelta(days=elapsed)
                spent = sum((days.get((week + timedelta(days=i)).date(), Decimal(0)) for i in range(elapsed)),
                            Decimal(0))
                history = {d: v for d, v in days.items() if d < now.date()}
                f = forecast(start=week, end=week + timedelta(days=7), now=now, actual=spent, daily=history)
                error = float((f.expected - actual_total) / actual_total)
                naive = float(spent / elapsed * 7 - actual_total) / float(actual_total)
                printed = actual_total.quantize(Decimal("0.01"))  # the range is printed in cents
                stats[7 - elapsed].append((abs(error), error, f.low <= printed <= f.high, abs(naive)))
    print(f"scenario {args.scenario} seed {args.seed}: {len(daily)} teams, weeks {weeks[0]:%Y-%m-%d} .. "
          f"{weeks[-1]:%Y-%m-%d} (after 4 weeks of history)")
    print(f"{'days left':>9} {'n':>4} {'MAPE':>7} {'bias':>7} {'in range':>9} {'naive MAPE':>11}")
    for left in sorted(stats, reverse=True):
        rows = stats[left]
        n = len(rows)
        print(f"{left:>9} {n:>4} {sum(r[0] for r in rows) / n:>7.1%} {sum(r[1] for r in rows) / n:>+7.1%} "
              f"{sum(r[2] for r in rows) / n:>9.0%} {sum(r[3] for r in rows) / n:>11.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
