"""The chart functions are pure: rows in, Plotly figures out (one look: Okabe-Ito, patterns, units, ISO dates)."""

from __future__ import annotations

import json
from decimal import Decimal

from apps.common.periods import last_days, span
from apps.dashboard import charts
from apps.dashboard.scope import parse_window
from apps.dashboard.tables import Block, Column, format_cell


def row(**kw):
    base = {"allocated_gpu_hours": 0.0, "working_gpu_hours": 0.0, "idle_gpu_hours": 0.0, "unmeasured_gpu_hours": 0.0,
            "cost": Decimal(0), "idle_cost": Decimal(0)}
    return {**base, **kw}


def test_it_stacks_working_idle_and_unmeasured_per_bucket_with_patterns_and_units():
    fig = charts.hours_split("h", [
        row(t="2026-11-23", working_gpu_hours=5, idle_gpu_hours=3, unmeasured_gpu_hours=1),
        row(t="2026-11-24", working_gpu_hours=2),
    ])
    assert [t["name"] for t in fig["data"]] == ["Working", "Idle in allocations", "Unmeasured"]
    assert fig["data"][0]["y"] == [5, 2] and fig["data"][1]["y"] == [3, 0]
    assert fig["layout"]["barmode"] == "stack"
    assert fig["data"][1]["marker"]["pattern"]["shape"] == "/"  # idle: grey and hatched, never colour alone
    assert "GPU-hours" in fig["data"][0]["hovertemplate"]
    assert fig["layout"]["colorway"][:3] == ["#0072B2", "#E69F00", "#009E73"]  # Okabe-Ito
    assert fig["config"]["displaylogo"] is False and fig["config"]["toImageButtonOptions"]["filename"] == "h"
    json.dumps(fig)  # plain JSON, no Decimal left


def test_the_cost_chart_splits_idle_cost_exactly_and_names_unmeasured_hours():
    rows = [row(t="d1", cost=Decimal("10.50"), idle_cost=Decimal("4.25"), unmeasured_gpu_hours=0.0)]
    fig = charts.cost_split("c", rows)
    assert [t["name"] for t in fig["data"]] == ["Working", "Idle in allocations"]
    assert fig["data"][0]["y"] == [6.25] and fig["data"][1]["y"] == [4.25]
    assert "$%{y:,.2f}" in fig["data"][0]["hovertemplate"]
    rows[0]["unmeasured_gpu_hours"] = 1.0
    assert charts.cost_split("c", rows)["data"][0]["name"] == "Working or unmeasured"


def test_it_puts_the_first_label_on_top_and_escapes_tenant_names():
    fig = charts.hbar("t", ["a", "<b>"], [("cost", [9, 1])], unit="usd", x_title="USD")
    assert fig["data"][0]["y"] == ["&lt;b&gt;", "a"]  # Plotly draws the last category at the top


def test_it_computes_busy_share_over_measured_hours_only():
    from apps.usage.figures import UsageFigures

    assert UsageFigures(working_gpu_hours=3, idle_gpu_hours=1, unmeasured_gpu_hours=100).activity == 0.75
    assert UsageFigures(unmeasured_gpu_hours=5).activity is None


def test_numbers_have_separators_units_and_never_show_unmeasured_as_zero():
    assert format_cell(Decimal("12345.678"), "usd") == "$12,345.68"
    assert format_cell(1234.56, "gpuh") == "1,234.6"
    assert format_cell(None, "activity") == "not measured"
    assert format_cell(0.0, "activity") == "0.0 %"
    assert format_cell("-3.50", "signed_usd") == "▼ -$3.50"
    assert format_cell(5400, "seconds") == "1.5 h"


def test_a_block_writes_its_rows_and_totals_as_csv_with_the_screens_headers():
    block = Block("b", "t", [Column("team", "Team"), Column("cost", "Cost (USD)", "usd"),
                             Column("activity", "Activity", "activity")],
                  [{"team": "=cmd()", "cost": Decimal("1.000001"), "activity": None}],
                  totals={"team": "Total", "cost": Decimal("1.000001"), "activity": 0.5})
    text = block.csv().decode()
    assert text.splitlines() == ["Team,Cost (USD),Activity", "'=cmd(),1.000001,", "Total,1.000001,50.0"]
    assert "&lt;" not in str(block.body) and "=cmd()" in str(block.body[0])


def test_periods_follow_the_url_and_the_bucket_follows_the_length():
    from datetime import UTC, datetime

    now = datetime(2026, 12, 1, 2, 30, tzinfo=UTC)
    w, errors = parse_window({"period": "2026-W48"}, now)
    assert (w.start.day, w.end.day, w.bucket, errors) == (23, 30, "day", [])
    assert w.previous().label == "2026-W47" and [p.label for p in w.history()] == [
        "2026-W47", "2026-W46", "2026-W45", "2026-W44"]
    m, _ = parse_window({"period": "2026-11"}, now)
    assert [p.label for p in m.history()] == ["2026-10", "2026-09", "2026-08"]
    d = last_days(2, now)
    assert (d.start, d.end, d.bucket) == (datetime(2026, 11, 30, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC), "hour")
    assert span(datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 6, 1, tzinfo=UTC)).bucket == "week"
    assert parse_window({"days": "x"}, now)[1]


def test_printed_columns_add_up_to_the_totals_row_by_largest_remainder():
    """The e-mail's rule on every table with a totals row: 3 x $0.333333 print as 0.34 + 0.33 + 0.33 = 1.00, and
    GPU-hours 2968.75 + 5671.25 print as 2968.8 + 5671.2 under 8640.0 (not 2968.8 + 5671.3 = 8640.1)."""
    import re

    cols = [Column("team", "Team"), Column("cost", "Cost (USD)", "usd"), Column("h", "GPU-h", "gpuh"),
            Column("activity", "Activity", "activity")]
    rows = [{"team": t, "cost": Decimal("0.333333"), "h": h, "activity": 0.5}
            for t, h in (("a", 2968.75), ("b", 5671.25), ("c", 0.0))]
    block = Block("b", "t", cols, rows, totals={"team": "Total", "cost": Decimal("0.999999"), "h": 8640.0,
                                               "activity": 0.5})

    def cells(html: str) -> list[str]:
        return re.findall(r'<td class="num">([^<]*)</td>', html)

    body = [cells(str(r)) for r in block.body]
    assert [b[0] for b in body] == ["$0.34", "$0.33", "$0.33"]
    assert [b[1] for b in body] == ["2,968.8", "5,671.2", "0.0"]
    assert cells(str(block.foot))[:2] == ["$1.00", "8,640.0"]
    # A column whose total is not the sum of its rows (a mean, a maximum) is printed as it is.
    mean = Block("m", "t", cols[:2], [{"team": "a", "cost": Decimal("1.005")}, {"team": "b", "cost": Decimal("3")}],
                 totals={"team": "Mean", "cost": Decimal("2.0025")})
    assert [cells(str(r))[0] for r in mean.body] == ["$1.00", "$3.00"]
