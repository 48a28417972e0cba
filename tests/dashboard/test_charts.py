"""The chart functions are pure: rows in, Plotly figure JSON out."""

from __future__ import annotations

import json

from apps.dashboard import charts


def row(**kw):
    base = {"allocated_gpu_hours": 0.0, "working_gpu_hours": 0.0, "idle_gpu_hours": 0.0, "unmeasured_gpu_hours": 0.0}
    return {**base, **kw}


def test_it_stacks_working_idle_and_unmeasured_per_day():
    fig = json.loads(charts.daily_activity([
        row(day="2026-11-23", working_gpu_hours=5, idle_gpu_hours=3, unmeasured_gpu_hours=1),
        row(day="2026-11-24", working_gpu_hours=2, idle_gpu_hours=0, unmeasured_gpu_hours=0),
    ]))
    assert [t["name"] for t in fig["data"]] == ["working", "idle", "unmeasured"]
    assert fig["data"][0]["y"] == [5, 2] and fig["data"][1]["y"] == [3, 0]
    assert fig["layout"]["barmode"] == "stack"


def test_it_puts_the_largest_team_on_top():
    fig = json.loads(charts.team_split([row(team="a", allocated_gpu_hours=1), row(team="b", allocated_gpu_hours=9)]))
    assert fig["data"][0]["y"] == ["a", "b"]  # Plotly draws the last category at the top


def test_it_computes_busy_share_over_measured_hours_only():
    from apps.usage.selectors import busy_share

    assert busy_share(row(working_gpu_hours=3, idle_gpu_hours=1, unmeasured_gpu_hours=100)) == 0.75
    assert busy_share(row(unmeasured_gpu_hours=5)) is None
