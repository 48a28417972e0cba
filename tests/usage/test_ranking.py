"""Rankings in the database (`apps.usage.selectors.ranking.rank`) against a brute-force ranking of the pod-hour rows.

The world: three days of seeded random pod-hours on two clusters, four teams, with ties made on purpose (pairs of
workloads whose rows are identical, figures in quarters of a GPU-hour and whole dollars, so every sum is exact
and a tie is a tie). The ranked periods start and end inside days, so the day rollups answer the whole days and
the hour rows the edges; the brute force reads only `PodHour`.
"""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from apps.inventory.models import Cluster
from apps.usage.activity import SIGNALS
from apps.usage.figures import UsageFigures
from apps.usage.models import PodHour
from apps.usage.selectors import TooLarge
from apps.usage.selectors.ranking import rank
from apps.usage.services import rollup_day, rollup_hour
from tests.harness.shared_rows import WORLD_FIXTURES

DAY0 = datetime(2026, 11, 23, tzinfo=UTC)
NAMES = {"workload": ("team", "cluster", "namespace", "workload"), "namespace": ("team", "cluster", "namespace"),
         "pod": ("team", "cluster", "namespace", "workload", "pod", "pod_uid")}
TEAMS = ("vision", "nlp", "infra", "Research")  # a capital: code-point order puts it first


def _row(cluster: Cluster, hour: datetime, team: str, namespace: str, workload: str, pod: str, q: list[int],
         price: int) -> PodHour:
    """A pod-hour of `q` quarters of GPU-hours per signal: (working, idle, unmeasured) for each of SIGNALS."""
    fields: dict[str, object] = {}
    allocated = sum(q[:3]) / 4
    for i, s in enumerate(SIGNALS):
        w, idle = (q[0], q[1]) if i % 2 == 0 else (q[1], q[0])  # the signals disagree on what worked
        fields.update({f"working_{s}": w / 4, f"idle_{s}": idle / 4, f"unmeasured_{s}": q[2] / 4,
                       f"idle_cost_{s}": Decimal(idle) / 4 * price})
    return PodHour(cluster=cluster, hour=hour, namespace=namespace, pod=pod, pod_uid=f"uid-{cluster.name}-{pod}",
                   workload=workload, team=team, node="n1", node_group="g1", gpu_model="H100", resources="x",
                   gpus=allocated, held_seconds=3600, price=price, allocated_gpu_hours=allocated,
                   cost=Decimal(allocated) * price, unpriced_gpu_hours=0.0, **fields)


def build_world(seed: int = 7) -> None:
    rnd = random.Random(seed)
    clusters = [Cluster.objects.create(name=n, prometheus_url=f"http://{n}:9090") for n in ("east", "west-2")]
    rows: list[PodHour] = []
    for n in range(40):
        cluster = clusters[n % 2]
        team = TEAMS[n % 4]
        namespace = f"{team.lower()}-{n % 5}"
        workload = f"Job/train-{n:02d}" if n % 5 else f"Deployment/serve.{n}"
        first = rnd.randrange(0, 60)
        hours = rnd.randrange(1, 30)
        price = rnd.choice((2, 3))
        quarters = {h: [rnd.randrange(0, 9) for _ in range(3)] for h in range(first, min(first + hours, 72))}
        for twin in ("", "-twin") if n % 7 == 0 else ("",):  # an identical workload beside it: a tie
            for h, q in quarters.items():
                if sum(q) == 0:
                    continue
                rows.append(_row(cluster, DAY0 + timedelta(hours=h), team, namespace, workload + twin,
                                 f"{workload.split('/')[1]}{twin}-{h // 24}", q, price))
    PodHour.objects.bulk_create(rows)
    for cluster in clusters:
        hours = sorted(set(PodHour.objects.filter(cluster=cluster).values_list("hour", flat=True)))
        for hour in hours:
            rollup_hour(cluster, hour)
        for day in sorted({h.date() for h in hours}):
            rollup_day(cluster, day)


def _figures(r: PodHour, signal: str) -> UsageFigures:
    return UsageFigures(r.allocated_gpu_hours, getattr(r, f"working_{signal}"), getattr(r, f"idle_{signal}"),
                        getattr(r, f"unmeasured_{signal}"), Decimal(r.cost), Decimal(getattr(r, f"idle_cost_{signal}")),
                        r.unpriced_gpu_hours)


def _exact_sum(parts: list[UsageFigures]) -> UsageFigures:
    return UsageFigures.exact_sum([tuple(f.as_dict().values()) for f in parts])


def brute_force(level: str, start: datetime, end: datetime, *, ordering: str, signal: str = "sm_active",
                visible: set[str] | None = None, filters: dict[str, set[str]] | None = None,
                activity_below: float | None = None, idle_only: bool = False) -> list[tuple[dict, UsageFigures]]:
    """Every row of the ranking, by reading each pod-hour in Python: group, sum, filter, sort by names, then by
    the key (stable), figures compared at a millionth, a missing activity last."""
    groups: dict[tuple, list[UsageFigures]] = defaultdict(list)
    for r in PodHour.objects.filter(hour__gte=start, hour__lt=end).select_related("cluster"):
        values = {"cluster": r.cluster.name, "team": r.team, "namespace": r.namespace, "workload": r.workload,
                  "pod": r.pod, "pod_uid": r.pod_uid}
        if visible is not None and r.team not in visible:
            continue
        if any(values[k] not in v for k, v in (filters or {}).items()):
            continue
        groups[tuple(values[k] for k in NAMES[level])].append(_figures(r, signal))
    rows = [(dict(zip(NAMES[level], key, strict=True)), _exact_sum(parts).rounded())
            for key, parts in groups.items()]
    if idle_only:
        rows = [r for r in rows if r[1].idle_gpu_hours > 0]
    if activity_below is not None:
        rows = [r for r in rows if r[1].activity is not None and r[1].activity < activity_below]
    rows.sort(key=lambda r: tuple(r[0].values()))
    key, descending = ordering.removeprefix("-"), ordering.startswith("-")

    def value(row):
        if key in row[0]:
            return row[0][key]
        v = row[1].activity if key == "activity" else getattr(row[1], key)
        return None if v is None else round(v, 6)

    present = sorted([r for r in rows if value(r) is not None], key=value, reverse=descending)
    return present + [r for r in rows if value(r) is None]


WORLD_FIXTURES.add("shared_ranking_world")


@pytest.fixture
def shared_ranking_world(shared_rows):
    return shared_rows.world("shared_ranking_world", build_world)


@pytest.fixture
def world(shared_ranking_world, db):
    """The world of the module docstring, built once for the tests that run one after another with it."""


START = DAY0 + timedelta(hours=5)  # partial day 1, whole day 2, partial day 3
END = DAY0 + timedelta(days=2, hours=19)


def _as_rows(ranking) -> list[tuple[dict, UsageFigures]]:
    return [(r.names, r.figures) for r in ranking.rows]


@pytest.mark.parametrize("level", ["workload", "namespace", "pod"])
@pytest.mark.parametrize("ordering", ["-idle_cost", "cost", "-allocated_gpu_hours", "-activity", "activity",
                                      "namespace", "-working_gpu_hours"])
def test_a_ranking_is_the_brute_force_ranking_page_by_page(world, level, ordering):
    expected = brute_force(level, START, END, ordering=ordering)
    assert len(expected) > 12
    first = rank(level=level, start=START, end=END, visible_teams=None, ordering=ordering, limit=5)
    later = rank(level=level, start=START, end=END, visible_teams=None, ordering=ordering, limit=5, offset=10)
    whole = rank(level=level, start=START, end=END, visible_teams=None, ordering=ordering, limit=None)
    assert _as_rows(first) == expected[:5]
    assert _as_rows(later) == expected[10:15]
    assert [r.rank for r in later.rows] == list(range(11, 16))
    assert _as_rows(whole) == expected
    assert first.count == later.count == len(expected)
    assert first.totals == later.totals == _exact_sum([f for _, f in expected]).rounded()


def test_the_world_has_ties_and_the_ranking_breaks_them_by_name(world):
    expected = brute_force("workload", START, END, ordering="-idle_cost")
    costs = [f.idle_cost for _, f in expected]
    assert len(costs) > len(set(costs))  # at least one tie, ranked by name
    got = _as_rows(rank(level="workload", start=START, end=END, visible_teams=None, limit=None))
    twins = [(i, n["workload"]) for i, (n, _) in enumerate(got) if n["workload"].endswith("-twin")]
    assert twins
    for i, name in twins:  # the twin follows its original (same figures, "-twin" sorts after)
        assert got[i - 1][0]["workload"] == name.removesuffix("-twin") and got[i - 1][1] == got[i][1]


@pytest.mark.parametrize("kwargs", [
    {"filters": {"team": ["nlp", "Research"]}},
    {"filters": {"cluster": ["west-2"]}},
    {"filters": {"cluster": ["east"], "namespace": ["vision-1", "infra-2"]}},
    {"visible_teams": {"vision"}},
    {"visible_teams": {"vision", "nlp"}, "filters": {"team": ["nlp", "infra"]}},
    {"signal": "gpu_util"},
    {"activity_below": 0.5},
    {"idle_only": True, "filters": {"workload": ["Job/train-01", "Deployment/serve.0"]}},
])
def test_filters_visibility_and_signals_rank_like_the_brute_force(world, kwargs):
    visible = kwargs.pop("visible_teams", None)
    filters = kwargs.get("filters", {})
    for level in ("workload", "namespace"):
        expected = brute_force(level, START, END, ordering="-idle_cost", visible=visible,
                               filters={k: set(v) for k, v in filters.items()},
                               **{k: v for k, v in kwargs.items() if k != "filters"})
        page = rank(level=level, start=START, end=END, visible_teams=visible, limit=4, offset=2, **kwargs)
        assert _as_rows(page) == expected[2:6], level
        assert page.count == len(expected)
        if visible is not None:  # a team lead sees only their teams
            assert {n["team"] for n, _ in expected} <= visible


def test_whole_days_and_an_empty_or_past_the_end_page(world):
    start, end = DAY0, DAY0 + timedelta(days=3)
    expected = brute_force("workload", start, end, ordering="-cost")
    page = rank(level="workload", start=start, end=end, visible_teams=None, ordering="-cost", limit=3)
    assert _as_rows(page) == expected[:3]
    past = rank(level="workload", start=start, end=end, visible_teams=None, ordering="-cost", limit=3, offset=10_000)
    assert past.rows == [] and past.count == len(expected) and past.totals == page.totals
    nothing = rank(level="workload", start=start, end=end, visible_teams=set(), limit=3)
    assert nothing.rows == [] and nothing.count == 0 and nothing.totals == UsageFigures()
    inside_an_hour = rank(level="namespace", start=START, end=START, visible_teams=None)
    assert inside_an_hour.count == 0


def test_a_pod_ranking_keeps_the_hour_level_bound(world, settings):
    settings.GPUFINOPS_API_MAX_HOURLY_DAYS = 2
    with pytest.raises(TooLarge):
        rank(level="pod", start=START, end=END, visible_teams=None)
    assert rank(level="workload", start=START, end=END, visible_teams=None).count > 0


def test_bad_arguments_are_refused(world):
    for kwargs in ({"level": "node"}, {"ordering": "-price"}, {"ordering": "pod"}, {"signal": "power"},
                   {"offset": -1}):
        with pytest.raises(ValueError):
            rank(**{"level": "workload", "start": START, "end": END, "visible_teams": None, **kwargs})
