"""Coverage-aware comparisons (apps/usage/figures.py): a change is shown only against a period with comparable
coverage; averages count only the covered periods and say how many. Pure: no database."""

from __future__ import annotations

from decimal import Decimal as D

from apps.usage.figures import change_if_comparable, covered_average, not_comparable

MIN = 0.9


def test_a_period_is_comparable_only_with_enough_final_hours():
    assert not_comparable(1.0, MIN) is None
    assert not_comparable(0.9, MIN) is None
    assert not_comparable(None, MIN) == "no data"
    assert not_comparable(0.0, MIN) == "no data"
    # The demo's first week: 15 of its 168 hours.
    assert not_comparable(15 / 168, MIN) == "only 8.9 % of its hours final (needs 90 %)"
    assert not_comparable(0.5, 0.75) == "only 50.0 % of its hours final (needs 75 %)"


def test_a_change_against_a_partial_period_is_na_with_why():
    partial = change_if_comparable(D("21414.02"), D("2048.30"), 15 / 168, MIN)
    assert (partial.amount, partial.delta, partial.delta_pct) == (None, None, None)
    assert partial.reason == "only 8.9 % of its hours final (needs 90 %)"
    full = change_if_comparable(D("110.00"), D("100.00"), 1.0, MIN)
    assert (full.delta, full.delta_pct, full.reason) == ("10.00", "10.0", None)
    assert change_if_comparable(D("1"), None, 1.0, MIN).reason == "no data"


def test_averages_count_only_covered_periods_and_say_how_many():
    avg = covered_average([D(100), D(200), D(5), D(0)], [1.0, 0.95, 0.1, None], MIN)
    assert (avg.mean, avg.count, avg.of) == (D(150), 2, 4)
    none = covered_average([D(5)], [0.2], MIN)
    assert (none.mean, none.count, none.of) == (None, 0, 1)
