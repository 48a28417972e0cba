"""The PromQL subset evaluator on hand-made samples: Prometheus 2.x semantics, and clear refusals."""

from __future__ import annotations

import math

import pytest

from devtools.simulator.promql import (
    Evaluator,
    ListStorage,
    PromQLError,
    PromQLExecutionError,
    format_value,
    parse,
    tokenize,
)

M = 60_000  # one minute, ms
T = 1_800_000_000_000  # an instant on the hour, ms


@pytest.fixture
def ev() -> Evaluator:
    s = ListStorage()
    for i in range(0, 61):  # a sample every minute from T - 1h to T, both ends included
        t = T - 60 * M + i * M
        s.add({"__name__": "up", "job": "a", "pod": "p1"}, t, float(i))
        s.add({"__name__": "up", "job": "b", "pod": ""}, t, 1.0)
        s.add({"__name__": "down", "job": "a", "pod": "p1"}, t, 2.0)
    s.add({"__name__": "late", "uid": "u1", "team": "x"}, T - 5 * M, 7.0)  # exactly at the lookback edge
    s.add({"__name__": "late", "uid": "u2", "team": "x"}, T - 5 * M - 1, 8.0)  # 1 ms beyond it
    s.add({"__name__": "late", "uid": "u3", "team": "y"}, T - 2 * M, 9.0)
    return Evaluator(s)


def q(ev: Evaluator, query: str, t: int = T) -> dict:
    kind, result = ev.query(query, t)
    assert kind == "vector"
    return {tuple(sorted(s.labels.items())): s.value for s in result}


def test_range_selectors_include_both_ends(ev):
    assert q(ev, 'count_over_time(up{job="a"}[1h])') == {(("job", "a"), ("pod", "p1")): 61.0}
    # the collector's window: [start, end) evaluated 1 ms before the end over the same length
    assert q(ev, 'count_over_time(up{job="a"}[3600000ms])', T - 1) == {(("job", "a"), ("pod", "p1")): 60.0}
    assert q(ev, 'sum_over_time(up{job="a"}[1h])', T)[(("job", "a"), ("pod", "p1"))] == sum(range(61))
    assert q(ev, 'avg_over_time(up{job="a"}[3600000ms])', T - 1)[(("job", "a"), ("pod", "p1"))] == 29.5
    assert q(ev, 'max_over_time(up{job="a"}[5m])')[(("job", "a"), ("pod", "p1"))] == 60.0
    assert q(ev, 'min_over_time(up{job="a"}[5m])')[(("job", "a"), ("pod", "p1"))] == 55.0
    assert q(ev, 'min_over_time(up{job="a"}[1h30m])')[(("job", "a"), ("pod", "p1"))] == 0.0


def test_last_over_time_keeps_the_metric_name_and_other_functions_drop_it(ev):
    assert q(ev, 'last_over_time(up{job="a"}[10m])', T - 30_000) == {
        (("__name__", "up"), ("job", "a"), ("pod", "p1")): 59.0
    }
    assert list(q(ev, 'max_over_time(up{job="a"}[10m])')) == [(("job", "a"), ("pod", "p1"))]


def test_instant_selectors_look_back_five_minutes_both_ends_included(ev):
    got = q(ev, "late")
    assert set(got) == {(("__name__", "late"), ("team", "x"), ("uid", "u1")),
                        (("__name__", "late"), ("team", "y"), ("uid", "u3"))}
    stamps = q(ev, "timestamp(late)")
    assert stamps[(("team", "x"), ("uid", "u1"))] == (T - 5 * M) / 1000  # the sample's own time
    assert q(ev, "timestamp(max_over_time(late[10m]))")[(("team", "y"), ("uid", "u3"))] == T / 1000


def test_subqueries_step_on_multiples_of_their_step(ev):
    # steps at T-2m, T-1m30s, T-1m, T-30s, T over [T - 2m, T]; `late` u3 is seen from T-2m on
    assert q(ev, 'count_over_time(timestamp(late{uid="u3"})[2m:30s])') == {(("team", "y"), ("uid", "u3")): 5.0}
    # starting 1 ms after a multiple of the step, the first step is the next multiple
    assert q(ev, 'count_over_time(timestamp(late{uid="u3"})[2m:30s])', T + 1) == {
        (("team", "y"), ("uid", "u3")): 4.0
    }
    mins = q(ev, "min_over_time(timestamp(late)[10m:30s])")
    assert mins[(("team", "x"), ("uid", "u1"))] == (T - 5 * M) / 1000
    assert mins[(("team", "x"), ("uid", "u2"))] == (T - 5 * M - 1) / 1000
    assert q(ev, "max_over_time(timestamp(late)[10m:1m])")[(("team", "x"), ("uid", "u2"))] == (T - 5 * M - 1) / 1000
    # a subquery of an arbitrary expression is evaluated step by step
    assert q(ev, 'max_over_time(max_over_time(up{job="a"}[1m])[10m:5m])')[(("job", "a"), ("pod", "p1"))] == 60.0


def test_matchers_anchor_regexes_and_treat_missing_labels_as_empty(ev):
    assert set(q(ev, 'up{job=~"a|b"}')) == {(("__name__", "up"), ("job", "a"), ("pod", "p1")),
                                             (("__name__", "up"), ("job", "b"))}
    assert q(ev, 'up{job=~"a."}') == {}
    assert set(q(ev, 'up{pod!=""}')) == {(("__name__", "up"), ("job", "a"), ("pod", "p1"))}
    assert set(q(ev, 'up{pod=""}')) == {(("__name__", "up"), ("job", "b"))}
    assert set(q(ev, 'up{job!~"a"}')) == {(("__name__", "up"), ("job", "b"))}
    assert len(q(ev, '{__name__=~"up|down", job="a"}')) == 2


def test_aggregations_group_by_or_without_labels(ev):
    assert q(ev, "count(up)") == {(): 2.0}
    assert q(ev, "sum by (job) (up)") == {(("job", "a"),): 60.0, (("job", "b"),): 1.0}
    assert q(ev, "sum(up) by (job)") == q(ev, "sum by (job) (up)")
    assert q(ev, "max without (uid) (late)") == {(("team", "x"),): 7.0, (("team", "y"),): 9.0}
    assert q(ev, "min by (team) (late)") == {(("team", "x"),): 7.0, (("team", "y"),): 9.0}
    assert q(ev, "avg(late)") == {(): 8.0}
    assert q(ev, 'count(up{job="nope"})') == {}
    assert q(ev, "count by (nope) (up)") == {(): 2.0}


def test_or_adds_right_hand_series_whose_labels_the_left_lacks(ev):
    got = q(ev, 'max_over_time(up{job="a"}[5m]) or max_over_time(down[5m]) or max_over_time(up{job="b"}[5m])')
    assert got == {(("job", "a"), ("pod", "p1")): 60.0, (("job", "b"),): 1.0}


def test_comparisons_with_a_scalar_filter(ev):
    assert q(ev, "late > 7") == {(("__name__", "late"), ("team", "y"), ("uid", "u3")): 9.0}
    assert q(ev, "late >= 7") == q(ev, "late")
    assert q(ev, "8 < late") == q(ev, "late > 8")
    assert q(ev, "late == 7") == {(("__name__", "late"), ("team", "x"), ("uid", "u1")): 7.0}
    assert len(q(ev, "late != 7")) == 1
    assert q(ev, 'min_over_time(up{job="b"}[1h]) < 1') == {}
    assert q(ev, "late > -1") == q(ev, "late")
    assert ev.query("3", T) == ("scalar", 3.0)


def test_arithmetic_between_scalars_and_vectors_drops_the_metric_name(ev):
    assert ev.query("1 + 2 * 3 - 4 / 2", T) == ("scalar", 5.0)
    assert ev.query("(1 + 2) * 3", T) == ("scalar", 9.0)
    assert ev.query("7 % 3", T) == ("scalar", 1.0)
    assert ev.query("-7 % 3", T) == ("scalar", -1.0)  # Go's math.Mod: the sign of the dividend
    assert ev.query("1 / 0", T) == ("scalar", math.inf)
    assert ev.query("-1 / 0", T) == ("scalar", -math.inf)
    assert math.isnan(ev.query("0 / 0", T)[1]) and math.isnan(ev.query("1 % 0", T)[1])
    assert q(ev, 'up{job="a"} * 2') == {(("job", "a"), ("pod", "p1")): 120.0}
    assert q(ev, '100 - up{job="a"}') == {(("job", "a"), ("pod", "p1")): 40.0}
    assert q(ev, '-up{job="a"}') == {(("job", "a"), ("pod", "p1")): -60.0}
    assert q(ev, 'up{job="a"} / 0') == {(("job", "a"), ("pod", "p1")): math.inf}
    assert q(ev, "late * 2 > 15") == {(("team", "y"), ("uid", "u3")): 18.0}  # u1: 14; u2 is beyond the lookback


def test_arithmetic_between_vectors_matches_one_to_one_on_all_labels(ev):
    # the increase of a counter over a range: max - min, label sets identical on both sides
    assert q(ev, 'max_over_time(up{job="a"}[10m]) - min_over_time(up{job="a"}[10m])') == {
        (("job", "a"), ("pod", "p1")): 10.0
    }
    assert q(ev, "(max_over_time(up[10m]) - min_over_time(up[10m])) > 0") == {(("job", "a"), ("pod", "p1")): 10.0}
    # names differ but the other labels match; series without a match are dropped
    assert q(ev, "up / down") == {(("job", "a"), ("pod", "p1")): 30.0}
    assert q(ev, 'up{job="b"} + down') == {}
    assert q(ev, "up - up") == {(("job", "a"), ("pod", "p1")): 0.0, (("job", "b"),): 0.0}
    # a match group with two series on one side is Prometheus' execution error
    with pytest.raises(PromQLExecutionError, match="duplicate series"):
        ev.query('up{job="a"} - {__name__=~"up|down", job="a"}', T)
    with pytest.raises(PromQLExecutionError, match="multiple matches"):
        ev.query('{__name__=~"up|down", job="a"} - max_over_time(up{job="a"}[1m])', T)


def test_and_unless_keep_the_left_samples_with_or_without_a_match_on_the_right(ev):
    # `up` and `down` match on every label but the name where job="a"; the left side's samples are kept as they are
    assert q(ev, "up and down") == {(("__name__", "up"), ("job", "a"), ("pod", "p1")): 60.0}
    assert q(ev, "up unless down") == {(("__name__", "up"), ("job", "b")): 1.0}  # pod="" is no label
    # the collector's vanished-GPU shape: devices of a longer window that the shorter one lacks
    assert q(ev, "count by (job) (up) unless count by (job) (down)") == {(("job", "b"),): 1.0}
    # precedence: `and`/`unless` before `or`, after comparisons
    assert q(ev, 'up > 10 unless down or down{job="x"}') == {}
    assert q(ev, "down or up unless down") == {(("__name__", "down"), ("job", "a"), ("pod", "p1")): 2.0,
                                              (("__name__", "up"), ("job", "b")): 1.0}


def test_a_function_result_with_duplicate_label_sets_is_an_error(ev):
    with pytest.raises(PromQLExecutionError, match="same labelset"):
        ev.query('count_over_time({__name__=~"up|down", job="a"}[5m])', T)
    assert q(ev, 'count(last_over_time({__name__=~"up|down", job="a"}[5m]))') == {(): 2.0}


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("rate(up[5m])", "function 'rate' is not supported"),
        ("up ^ 2", "arithmetic operator"),
        ("up atan2 up", "arithmetic operator"),
        ("up - on(job) down", "vector matching"),
        ("up / ignoring(pod) down", "vector matching"),
        ("up[5m] - 1", "only scalar and instant vector"),
        ("-up[5m]", "scalar or instant vector"),
        ("up and on(job) down", "vector matching"),
        ("up unless ignoring(pod) down", "vector matching"),
        ("1 unless up", "set operator 'unless' not allowed"),
        ("up offset 5m", "modifier is not supported"),
        ("up @ 100", "modifier is not supported"),
        ("up > bool 1", "bool modifier"),
        ("up > on(job) down", "vector matching"),
        ("up or ignoring(job) down", "vector matching"),
        ("up > down", "two instant vectors"),
        ("1 > 2", "bool modifier"),
        ("topk(3, up)", "aggregation 'topk' is not supported"),
        ("quantile(0.5, up)", "aggregation 'quantile' is not supported"),
        ("max_over_time(up)", "expected a range vector"),
        ("max_over_time(up[5m:])", "explicit step"),
        ("(up)[5m]", "ranges are only allowed on vector selectors"),
        ("timestamp(up[5m])", "expected an instant vector"),
        ("sum(up[5m])", "expected an instant vector"),
        ("{}", "non-empty matcher"),
        ('{job=""}', "non-empty matcher"),
        ('{job=~".*"}', "non-empty matcher"),
        ('up{job="a"', "expected"),
        ('up{job~"a"}', "unexpected character"),
        ("up{job}", "label matching operator"),
        ("up{job=a}", "expected string"),
        ('"text"', "string literals"),
        ('up{job=~"("}', "invalid regular expression"),
        ("sum by (job) (up) by (pod)", "grouping given twice"),
        ("max_over_time(up[5m], 2)", "exactly one argument"),
        ("up[0s]", "range must be positive"),
        ("up}", "unexpected token"),
        ("up $", "unexpected character"),
        ("", "unexpected token"),
    ],
)
def test_it_refuses_anything_outside_the_subset(ev, query, message):
    with pytest.raises(PromQLError, match=message):
        ev.query(query, T)


def test_it_tokenizes_durations_numbers_and_strings():
    assert [t.value for t in tokenize("[1h30m] [3600000ms] [1d] [2w]") if t.kind == "duration"] == [
        5_400_000, 3_600_000, 86_400_000, 1_209_600_000
    ]
    assert [t.value for t in tokenize("1e3 0x10 .5 2.") if t.kind == "number"] == [1000.0, 16.0, 0.5, 2.0]
    assert tokenize(r'"a\"b\n" `raw\n` ' + "'\\x41'")[0].value == 'a"b\n'
    assert [t.value for t in tokenize(r'"a\"b\n" `raw\n` ' + "'\\x41'")[1:3]] == ["raw\\n", "A"]
    assert parse("max_over_time(x[5m])") is parse("max_over_time(x[5m])")  # parsed once


def test_it_formats_values_like_prometheus():
    assert [format_value(v) for v in (1.0, 0.5, 1795219200.0, 1e-7, -2.25, 1e21, 0.1 + 0.2)] == [
        "1", "0.5", "1795219200", "0.0000001", "-2.25", "1000000000000000000000", "0.30000000000000004"
    ]
    assert [format_value(v) for v in (math.nan, math.inf, -math.inf)] == ["NaN", "+Inf", "-Inf"]
