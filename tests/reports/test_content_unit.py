"""The report's content as pure functions, without services or a database: the printing rules
(`apps.usage.figures`), the phases of `apps.reports.statement` and `content_figures` over hand-made usage reports.
Every expected figure is worked out by hand in the comments (ledger.md "Money", docs/reports.md "Rounding")."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal as D

import pytest

from apps.findings.selectors import TeamInfraLoss
from apps.reports import statement
from apps.reports.content import Gathered, Scope, content_digest, content_figures
from apps.reports.periods import Period, PeriodState
from apps.reports.selectors import IdleItem
from apps.usage import money
from apps.usage.figures import (
    TENTH,
    CapacityFigures,
    PrintedRows,
    UsageFigures,
    UsageRow,
    apportion_places,
    as_shown,
    average,
    change,
    change_from_average,
    pct,
    printed_shares,
    round_to,
)
from apps.usage.selectors import UsageReport

START, END = datetime(2026, 11, 16, tzinfo=UTC), datetime(2026, 11, 23, tzinfo=UTC)
PERIOD = Period(START, END, "weekly", "2026-W47")


def usage(cost: str = "0", allocated: float = 0.0, *, working: float = 0.0, idle: float = 0.0,
          unmeasured: float = 0.0, idle_cost: str = "0", unpriced: float = 0.0) -> UsageFigures:
    return UsageFigures(allocated, working, idle, unmeasured, D(cost), D(idle_cost), unpriced)


def team_report(teams: dict[str, UsageFigures], totals: UsageFigures,
                capacity: CapacityFigures | None = None) -> UsageReport:
    """A usage report grouped by team, as `usage_report` answers it (the totals given, not recomputed)."""
    rows = [UsageRow({"team": t}, f, f.coverage) for t, f in teams.items()]
    return UsageReport(start=START, end=END, group_by=["team"], signal="sm_active", results=rows, totals=totals,
                       capacity=capacity, provisional=False, coverage=totals.coverage, source="day")


# The period: three teams (c only on GPU models without a price) and the fleet's capacity.
A = usage("60.004000", 10.0, working=6.0, idle=3.0, unmeasured=1.0, idle_cost="18.001200")
B = usage("39.996000", 5.0, working=5.0)
C = usage("0.000000", 2.0, working=1.0, idle=1.0, unpriced=2.0)
CURRENT = team_report(
    {"a": A, "b": B, "c": C},
    usage("100.000000", 17.0, working=12.0, idle=4.0, unmeasured=1.0, idle_cost="18.001200", unpriced=2.0),
    CapacityFigures(24.0, 7.0, 1.0, 2.0, D("120.000000"), D("20.000000")),
)
# The previous period: a, and d (gone since); b had nothing.
PREVIOUS = team_report(
    {"a": usage("50.000000", 8.0), "d": usage("10.000000", 2.0)}, usage("60.000000", 10.0),
    CapacityFigures(20.0, 10.0, 0.0, 0.0, D("100.000000"), D("40.000000")),
)
# Another period of the average: a and e.
EARLIER = team_report(
    {"a": usage("70.000000", 9.0), "e": usage("40.000000", 4.0)}, usage("110.000000", 13.0),
    CapacityFigures(25.0, 12.0, 0.0, 0.0, D("140.000000"), D("30.000000")),
)
TEAMS = ["a", "b", "c", "d"]  # largest cost first; c and d (both 0) by name


# ---- Printing rules ----


@pytest.mark.parametrize(("value", "places", "printed"), [
    (0.05, TENTH, "0.0"),  # half to even, on the decimal the float prints as
    (0.15, TENTH, "0.2"),
    (0.25, TENTH, "0.2"),
    (1.35, TENTH, "1.4"),
    (D("1.005"), money.CENT, "1.00"),
    (D("1.015"), money.CENT, "1.02"),
    (None, money.CENT, "0.00"),
])
def test_one_figure_rounds_half_to_even(value, places, printed):
    assert str(round_to(value, places)) == printed


@pytest.mark.parametrize(("value", "unit", "shown"), [
    (0.15, "gpuh", "0.1"),  # the page shows the float: 0.1499999... rounds down (the e-mail's rule says 0.2)
    (0.25, "gpuh", "0.2"),
    (1234.56, "gpuh", "1234.6"),
    (None, "gpuh", "0.0"),
    (D("2.675"), "usd", "2.68"),
    (D("2.665"), "usd", "2.66"),
])
def test_a_page_shows_gpu_hours_as_the_float_prints_and_money_in_cents(value, unit, shown):
    assert str(as_shown(value, unit)) == shown


@pytest.mark.parametrize(("part", "whole", "percent"), [
    (1, 3, "33.3"), (2, 3, "66.7"), (0, 5, "0.0"), (D("18.0012"), D("100"), "18.0"), (1, 0, None), (0, 0, None),
])
def test_a_percentage_is_at_a_tenth_and_none_of_nothing(part, whole, percent):
    result = pct(part, whole)
    assert (None if result is None else str(result)) == percent


@pytest.mark.parametrize(("values", "total", "places", "printed"), [
    # floors 0.3 + 0.3 + 0.3 = 0.9; the tenth left goes to the largest remainder (0.04 of the last)
    ([0.33, 0.33, 0.34], 1.0, TENTH, ["0.3", "0.3", "0.4"]),
    # equal remainders: the earlier rows first
    ([1 / 3, 1 / 3, 1 / 3], 1.0, TENTH, ["0.4", "0.3", "0.3"]),
    # cents: 3.015 prints 3.02 (half to even), floors 3 x 1.00, two cents to the first two rows
    ([D("1.005"), D("1.005"), D("1.005")], D("3.015"), money.CENT, ["1.01", "1.01", "1.00"]),
    # a total below the rows' floors (rows apportioned to another total): a cent taken from the last row
    ([D("0.50"), D("0.50")], D("0.99"), money.CENT, ["0.50", "0.49"]),
])
def test_apportioned_rows_add_up_to_the_printed_total(values, total, places, printed):
    rows = apportion_places(values, total, places)
    assert [str(v) for v in rows] == printed
    assert sum(rows, D(0)) == round_to(total, places)


def test_shares_add_up_to_a_hundred_and_are_none_without_a_total():
    # 60 / 40 / 0 / 20 of 120: 50, 33.33.., 0, 16.66..; the tenth left goes to 16.66.. (the larger remainder)
    assert [str(s) for s in printed_shares([D("60.00"), D("40.00"), D("0.00"), D("20.00")], D("120.00"))] == [
        "50.0", "33.3", "0.0", "16.7"]
    # thirds: 33.3 each would print 99.9; the tenth left goes to the first (equal remainders)
    assert [str(s) for s in printed_shares([D("1.00")] * 3, D("3.00"))] == ["33.4", "33.3", "33.3"]
    assert printed_shares([D("0.00"), D("0.00")], D("0.00")) == [None, None]


def test_printed_rows_of_the_fleet_add_up_to_the_capacity():
    """docs/reports.md: 17,919.8208 = charged 4,479.9552 + unallocated 13,439.8656 prints 17,919.82 =
    4,479.95 + 13,439.87; two equal teams of the charge print 2,239.98 + 2,239.97."""
    half = usage("2239.977600", 5.0)
    printed = PrintedRows.of([half, half], usage("4479.955200", 10.0),
                             CapacityFigures(30.04, 20.04, 0.0, 0.0, D("17919.820800"), D("13439.865600")))
    assert (printed.total, printed.charged, printed.unallocated) == (D("17919.82"), D("4479.95"), D("13439.87"))
    assert printed.costs == (D("2239.98"), D("2239.97"))
    assert (printed.total_hours, printed.charged_hours, printed.unallocated_hours) == (D("30.0"), D("10.0"),
                                                                                       D("20.0"))
    assert printed.hours == (D("5.0"), D("5.0"))
    assert printed.with_unallocated() == [D("2239.98"), D("2239.97"), D("13439.87")]


def test_printed_rows_of_some_teams_add_up_to_their_charge():
    printed = PrintedRows.of([A, B, C], CURRENT.totals)
    # floors 60.00 + 39.99 + 0.00 = 99.99: the cent left goes to b (remainder 0.006 > 0.004)
    assert printed.costs == (D("60.00"), D("40.00"), D("0.00"))
    assert (printed.total, printed.charged, printed.unallocated) == (D("100.00"), D("100.00"), None)
    assert printed.hours == (D("10.0"), D("5.0"), D("2.0")) and printed.total_hours == D("17.0")
    assert printed.with_unallocated() == list(printed.costs)


@pytest.mark.parametrize(("current", "previous", "delta", "delta_pct"), [
    ("110.00", "100.00", "10.00", "10.0"),
    ("90.00", "100.00", "-10.00", "-10.0"),
    ("100.00", "300.00", "-200.00", "-66.7"),
    ("5.00", "0.00", "5.00", "new"),  # nothing before: new
    ("0.00", "0.00", "0.00", None),  # nothing either time: no percentage, not new
    ("5.00", None, None, None),  # no comparison (the previous period has no ledger)
])
def test_a_change_against_the_previous_period_is_the_difference_of_printed_figures(current, previous, delta,
                                                                                    delta_pct):
    result = change(D(current), None if previous is None else D(previous))
    assert (result.delta, result.delta_pct) == (delta, delta_pct)


@pytest.mark.parametrize(("exact", "mean", "delta", "delta_pct"), [
    ("10.004", "7.5", "2.50", "33.4"),  # 2.504 to the cent; 2.504 / 7.5 = 33.386..%
    ("60.004", "60", "0.00", "0.0"),
    ("0", "5", "-5.00", "-100.0"),
    ("3", "0", "3.00", "new"),
    ("0", "0", "0.00", None),
    ("3", None, None, None),  # no period of the average has data
])
def test_a_change_against_the_average_is_rounded_once_from_exact_figures(exact, mean, delta, delta_pct):
    result = change_from_average(D(exact), None if mean is None else D(mean))
    assert (result.delta, result.delta_pct) == (delta, delta_pct)


@pytest.mark.parametrize(("values", "mean"), [
    ([], None), ([D("50"), D("70")], D("60")), ([D("10"), D("0")], D("5")), ([1.5, D("2.5")], D("2")),
])
def test_an_average_is_exact_and_none_without_periods(values, mean):
    assert average(values) == mean


# ---- The phases ----


def phases(previous=PREVIOUS, history=(PREVIOUS, EARLIER), fleet=True):
    printed = CURRENT.printed_rows(TEAMS, fleet=fleet)
    printed_prev = previous.printed_rows(TEAMS, fleet=fleet) if previous else None
    rows = statement.team_rows(TEAMS, CURRENT, printed, printed_prev, list(history))
    if fleet:
        rows.append(statement.unallocated_row(CURRENT.capacity, printed, printed_prev, list(history)))
    return printed, rows, statement.total_row(CURRENT, printed, printed_prev, list(history), fleet)


def test_teams_of_the_period_and_the_previous_one_are_ordered_by_cost_then_name():
    assert statement.team_order(CURRENT, PREVIOUS) == TEAMS
    assert statement.team_order(CURRENT, None) == ["a", "b", "c"]


def test_each_row_is_printed_so_the_rows_add_up_with_the_unallocated_row_last():
    printed, rows, total = phases()
    assert [(r.name, r.kind, str(r.cost_printed), str(r.gpu_hours_printed)) for r in rows] == [
        ("a", "team", "60.00", "10.0"), ("b", "team", "40.00", "5.0"), ("c", "team", "0.00", "2.0"),
        ("d", "team", "0.00", "0.0"), (statement.UNALLOCATED, "unallocated", "20.00", "7.0")]
    assert sum((r.cost_printed for r in rows), D(0)) == total.cost_printed == D("120.00")
    assert sum((r.gpu_hours_printed for r in rows), D(0)) == total.gpu_hours_printed == D("24.0")
    assert [str(r.share) for r in rows] == ["50.0", "33.3", "0.0", "0.0", "16.7"] and str(total.share) == "100.0"
    assert total.cost == D("120.000000") and total.gpu_hours == 24.0


def test_changes_against_the_previous_period_are_new_gone_or_none():
    _, rows, total = phases()
    changes = {r.name: (str(r.prev_printed), r.vs_previous.delta, r.vs_previous.delta_pct) for r in [*rows, total]}
    assert changes == {
        "a": ("50.00", "10.00", "20.0"),  # 60.00 - 50.00, of 50.00
        "b": ("0.00", "40.00", "new"),  # nothing before
        "c": ("0.00", "0.00", None),  # nothing either time
        "d": ("10.00", "-10.00", "-100.0"),  # gone
        statement.UNALLOCATED: ("40.00", "-20.00", "-50.0"),
        "Total": ("100.00", "20.00", "20.0"),
    }
    _, rows, total = phases(previous=None, history=())
    assert {(r.prev_printed, r.vs_previous.delta, r.average, r.vs_average.delta) for r in [*rows, total]} == {
        (None, None, None, None)}


def test_changes_against_the_average_of_the_periods_with_data():
    _, rows, total = phases()
    averages = {r.name: (r.average, r.vs_average.delta, r.vs_average.delta_pct) for r in [*rows, total]}
    assert averages == {
        "a": (D("60"), "0.00", "0.0"),  # (50 + 70) / 2; 60.004 - 60 prints 0.00
        "b": (D("0"), "40.00", "new"),  # absent from both periods
        "c": (D("0"), "0.00", None),
        "d": (D("5"), "-5.00", "-100.0"),  # (10 + 0) / 2
        statement.UNALLOCATED: (D("35"), "-15.00", "-42.9"),  # (40 + 30) / 2; -15 / 35
        "Total": (D("120"), "0.00", "0.0"),  # the capacity cost: (100 + 140) / 2
    }


def test_a_scope_without_the_fleet_totals_what_its_teams_were_charged():
    printed, rows, total = phases(fleet=False)
    assert [r.kind for r in rows] == ["team"] * 4 and printed.unallocated is None
    assert (total.cost, total.cost_printed, total.gpu_hours) == (D("100.000000"), D("100.00"), 17.0)
    assert (total.vs_previous.delta, total.vs_previous.delta_pct) == ("40.00", "66.7")  # 100.00 - 60.00
    assert total.average == D("85")  # (60 + 110) / 2: the teams' charge, not the capacity


def test_hours_only_on_unpriced_models_are_marked_unpriced_never_zero():
    _, rows, _ = phases()
    assert {r.name: r.unpriced_only for r in rows} == {"a": False, "b": False, "c": True, "d": False,
                                                        statement.UNALLOCATED: False}


def test_movers_are_the_largest_changes_either_way_without_unchanged_rows():
    _, rows, _ = phases()
    assert [r.name for r in statement.movers(rows)] == ["b", "a", "d"]  # 40, then 10 and -10 by name
    assert [r.name for r in statement.movers(rows, limit=1)] == ["b"]
    _, rows, _ = phases(previous=None)
    assert statement.movers(rows) == []


def test_infra_loss_is_printed_per_team_adding_up_to_the_printed_total():
    loss = statement.infra_loss(TEAMS, {"a": TeamInfraLoss("a", 1.5, D("3.005000")),
                                        "b": TeamInfraLoss("b", 0.5, D("1.000000"))})
    # 4.005 prints 4.00 (half to even); floors 3.00 + 1.00 already add up
    assert {t: (str(v.cost), str(v.printed), v.gpu_hours) for t, v in loss.by_team.items()} == {
        "a": ("3.005000", "3.00", 1.5), "b": ("1.000000", "1.00", 0.5), "c": ("0", "0.00", 0.0),
        "d": ("0", "0.00", 0.0)}
    assert (loss.total, loss.printed, loss.gpu_hours) == (D("4.005000"), D("4.00"), 2.0)
    none = statement.infra_loss(TEAMS, {})
    assert (none.total, none.printed, none.gpu_hours) == (D(0), D("0.00"), 0.0)


# ---- The JSON figures ----


def gathered(*, credited: bool = False, history=(PREVIOUS, EARLIER)) -> Gathered:
    idle = [IdleItem("a", "c1", "ml", "Job/train", 10.0, 3.0, D("60.004000"), D("18.001200"), 0.0),
            IdleItem("c", "c1", "ml", "Job/free", 2.0, 1.0, D("0"), D("0"), 2.0)]
    return Gathered(
        state=PeriodState(PERIOD, ended=True), current=CURRENT, previous_period=PERIOD.previous(),
        previous=PREVIOUS, previous_reason=None, history_periods=[PERIOD.previous(i + 1) for i in range(len(history))],
        history=list(history),
        fleet=True, infra_loss={"a": TeamInfraLoss("a", 1.5, D("3.005000"))}, credited=credited,
        idle_kind="workload", idle=idle, csv=b"team\n", focus=b"focus\n",
    )


def test_the_figures_an_edition_stores():
    f = content_figures(PERIOD, Scope(), "sm_active", gathered())
    assert [r["cost_printed"] for r in f["rows"]] == ["60.00", "40.00", "0.00", "0.00", "20.00"]
    assert f["total_row"]["cost_printed"] == f["headline"]["capacity_cost_printed"] == "120.00"
    a, unallocated = f["rows"][0], f["rows"][-1]
    assert a == {
        "name": "a", "kind": "team", "cost": "60.004000", "cost_printed": "60.00", "share": "50.0",
        "prev_printed": "50.00", "delta": "10.00", "delta_pct": "20.0", "avg": "60.000000", "avg_delta": "0.00",
        "avg_delta_pct": "0.0", "gpu_hours": 10.0, "gpu_hours_printed": "10.0", "idle_gpu_hours": 3.0,
        "unmeasured_gpu_hours": 1.0, "idle_pct": "30.0", "idle_cost": "18.001200", "unpriced_gpu_hours": 0.0,
        "unpriced_only": False, "infra_loss_cost": "3.005000", "infra_loss_printed": "3.00",  # 3.005 -> 3.00
        "infra_loss_gpu_hours": 1.5,
    }
    assert unallocated["kind"] == "unallocated" and unallocated["cost"] == "20.000000"
    no_usage = ("idle_gpu_hours", "unmeasured_gpu_hours", "idle_pct", "idle_cost", "unpriced_gpu_hours",
                "infra_loss_cost", "infra_loss_printed", "infra_loss_gpu_hours")
    assert [unallocated[k] for k in no_usage] == [None] * len(no_usage)
    h = f["headline"]
    assert (h["charged_printed"], h["unallocated_printed"], h["charged_share"], h["unallocated_share"]) == (
        "100.00", "20.00", "83.3", "16.7")
    assert (h["reconciles"], h["reconciliation_diff"], h["idle_share_of_charged"]) == (True, "0.00", "18.0")
    assert (h["infra_loss_printed"], h["infra_loss_credited"], h["net_charged_printed"]) == ("3.00", False, None)
    assert f["total_row"]["idle_pct"] == "23.5"  # 4 / 17
    assert [m["name"] for m in f["movers"]] == ["b", "a", "d"]
    assert [(r["idle_cost_printed"], r["idle_gpu_hours_printed"], r["idle_pct"], r["unpriced_only"])
            for r in f["top_idle"]["rows"]] == [("18.00", "3.0", "30.0", False), ("0.00", "1.0", "50.0", True)]
    assert f["totals"]["cost"] == "100.000000" and f["capacity"]["unallocated_cost"] == "20.000000"
    assert f["previous"] == {"period": "2026-W46", "available": True, "reason": None}
    assert f["average"] == {"periods": ["2026-W46", "2026-W45"], "count": 2, "of": 4}


def test_a_credited_infra_loss_nets_the_charge_and_restates_when_it_changes():
    f = content_figures(PERIOD, Scope(), "sm_active", gathered(credited=True))
    assert f["headline"]["net_charged_printed"] == "97.00"  # 100.00 - 3.00
    assert content_digest(f, True) != content_digest(f, False)
    other = content_figures(PERIOD, Scope(), "sm_active", gathered(credited=True, history=()))
    # an average is not the period's own figure: no restatement when only the periods before changed
    assert other["average"]["count"] == 0 and other["rows"][0]["avg"] is None
    assert content_digest(other, True) == content_digest(f, True)
