"""The ISO-week workload rollup (`WorkloadWeek`): always the sum of its `WorkloadDay` rows, after re-collection and
restatement, and a ranking over whole weeks that reads it still equals the brute force over the pod-hour rows.

The world: eleven days (Saturday 2026-11-21 to Tuesday 2026-12-01, so one whole ISO week with days on both sides) of
seeded random pod-hours on two clusters, in quarters of a GPU-hour and whole dollars (every sum exact), written and
rolled up as the ledger's write path does for each hour (`rollup_hour`, `rollup_day`).
"""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from apps.inventory.models import Cluster
from apps.usage.models import PodHour, WorkloadDay, WorkloadWeek
from apps.usage.selectors.ranking import rank, whole_weeks
from apps.usage.services import SUM_COLUMNS, WORKLOAD_KEYS, rollup_day, rollup_hour
from tests.usage.test_ranking import TEAMS, _row, brute_force

DAY0 = datetime(2026, 11, 21, tzinfo=UTC)  # a Saturday
DAYS = 11
pytestmark = pytest.mark.django_db


def _roll(cluster: Cluster, days: list[date]) -> None:
    """What write_bucket does after replacing a bucket's rows (the hour's rollups, then its day's), for these days."""
    for day in days:
        start = datetime(day.year, day.month, day.day, tzinfo=UTC)
        for h in range(24):
            rollup_hour(cluster, start + timedelta(hours=h))
        rollup_day(cluster, day)


def build(seed: int = 11) -> list[Cluster]:
    rnd = random.Random(seed)
    clusters = [Cluster.objects.create(name=n, prometheus_url=f"http://{n}:9090") for n in ("east", "west-2")]
    rows = []
    for n in range(36):
        team = TEAMS[n % 4]
        workload = f"Job/train-{n:02d}" if n % 5 else f"Deployment/serve.{n}"
        first, hours, price = rnd.randrange(0, DAYS * 24 - 6), rnd.randrange(1, 60), rnd.choice((2, 3))
        for h in range(first, min(first + hours, DAYS * 24)):
            q = [rnd.randrange(0, 9) for _ in range(3)]
            if sum(q):
                rows.append(_row(clusters[n % 2], DAY0 + timedelta(hours=h), team, f"{team.lower()}-{n % 3}",
                                 workload, f"{workload.split('/')[1]}-{h // 24}", q, price))
    PodHour.objects.bulk_create(rows)
    for cluster in clusters:
        _roll(cluster, [(DAY0 + timedelta(days=d)).date() for d in range(DAYS)])
    return clusters


def week_rows() -> dict[tuple, tuple]:
    return {(r[0], r[1], *r[2:7]): tuple(r[7:]) for r in WorkloadWeek.objects.values_list(
        "cluster_id", "week", *WORKLOAD_KEYS, *SUM_COLUMNS)}


def summed_days() -> dict[tuple, tuple]:
    """WorkloadDay summed by ISO week in Python (exact here: quarters and whole dollars)."""
    sums: dict[tuple, list] = defaultdict(lambda: [0.0, 0.0] + [0.0] * 12 + [Decimal(0)] * 5)
    for r in WorkloadDay.objects.values_list("cluster_id", "day", *WORKLOAD_KEYS, *SUM_COLUMNS):
        key = (r[0], r[1] - timedelta(days=r[1].weekday()), *r[2:7])
        sums[key] = [a + b for a, b in zip(sums[key], r[7:], strict=True)]
    return {k: tuple(v) for k, v in sums.items()}


def test_the_week_rollup_is_the_sum_of_its_days_after_re_collection_and_restatement():
    clusters = build()
    assert {k[1] for k in week_rows()} == {date(2026, 11, 16), date(2026, 11, 23), date(2026, 11, 30)}
    before = week_rows()
    assert before == summed_days() and len(before) > 30

    _roll(clusters[0], [date(2026, 11, 25)])  # re-collecting a day changes nothing
    assert week_rows() == before

    # A restatement of Wednesday 25th: one workload leaves the day, one changes, a new one appears.
    day = datetime(2026, 11, 25, tzinfo=UTC)
    on_day = PodHour.objects.filter(cluster=clusters[0], hour__gte=day, hour__lt=day + timedelta(days=1))
    names = sorted(set(on_day.values_list("workload", flat=True)))
    assert len(names) >= 2
    on_day.filter(workload=names[0]).delete()
    on_day.filter(workload=names[1]).update(allocated_gpu_hours=7.25, cost=Decimal(21))
    PodHour.objects.bulk_create([_row(clusters[0], day + timedelta(hours=3), "nlp", "nlp-9", "Job/late", "late-0",
                                      [1, 2, 3], 2)])
    _roll(clusters[0], [day.date()])
    after = week_rows()
    assert after == summed_days() and after != before
    assert any(k[4] == "Job/late" for k in after)


def test_a_ranking_over_whole_weeks_is_the_brute_force_ranking():
    build()
    some = sorted(set(PodHour.objects.values_list("workload", flat=True)))[::2]  # a workload filter
    cases = [
        (DAY0 + timedelta(hours=5), DAY0 + timedelta(days=DAYS - 1, hours=19)),  # hours, days, a week, days, hours
        (datetime(2026, 11, 23, tzinfo=UTC), datetime(2026, 11, 30, tzinfo=UTC)),  # exactly the week
        (DAY0, DAY0 + timedelta(days=DAYS)),  # days before and after the week
    ]
    for start, end in cases:
        assert whole_weeks(start, end) == (datetime(2026, 11, 23, tzinfo=UTC), datetime(2026, 11, 30, tzinfo=UTC))
        for level, ordering in (("workload", "-idle_cost"), ("workload", "cost"), ("namespace", "-activity")):
            expected = brute_force(level, start, end, ordering=ordering)
            got = rank(level=level, start=start, end=end, visible_teams=None, ordering=ordering, limit=None)
            assert [(r.names, r.figures) for r in got.rows] == expected, (start, end, level)
            page = rank(level=level, start=start, end=end, visible_teams={"nlp", "infra"}, ordering=ordering,
                        filters={"workload": some}, limit=3, offset=2)
            visible = brute_force(level, start, end, ordering=ordering, visible={"nlp", "infra"},
                                  filters={"workload": set(some)})
            assert [(r.names, r.figures) for r in page.rows] == visible[2:5] and page.count == len(visible)
    assert whole_weeks(DAY0, DAY0 + timedelta(days=6)) is None
