"""The typed figures' fast paths (apps/usage/figures.py, apps/usage/money.py) against the rules they stand for: the
API's row dicts in field order, figures from database sums exactly as rounding each field, money at the
micro-dollar from every type a database returns. Pure: no database."""

from __future__ import annotations

import pickle
from dataclasses import replace
from decimal import ROUND_HALF_EVEN, Decimal

import pytest

from apps.usage import money
from apps.usage.figures import CapacityFigures, UsageFigures, UsageRow, round_hours

SUMS = [
    (8694.5198787775, 3563.8659166124435, 5117.671064107279, 12.982898057777778, Decimal("27471.497237"),
     Decimal("16107.747977"), 0.0),
    (None, None, None, None, None, None, None),  # a group whose sums are all NULL
    (1, 0, 1, 0, 2.5, 0.0000005, 3),  # SQLite: ints and floats
    (0.1 + 0.2, 1e-7, 2.0000005, 5e-7, "12.3456785", Decimal("0.0000015"), 1e16),
]


@pytest.mark.parametrize("cls, values", [
    (UsageFigures, (1.5, 0.5, 1.0, 0.0, Decimal("3.000001"), Decimal("1.5"), 0.25)),
    (CapacityFigures, (10.0, 2.0, 1.0, 0.0, Decimal("40"), Decimal("8"))),
])
def test_as_dict_is_every_field_by_name_in_field_order_however_the_figures_were_made(cls, values):
    made = cls(*values)
    expected = {name: getattr(made, name) for name in cls.names()}
    for figures in (made, replace(made), pickle.loads(pickle.dumps(made)), cls.fold([made])):
        assert list(figures.as_dict().items()) == list(expected.items())
    copy = made.as_dict()
    copy[cls.names()[0]] = -1  # the answer's dict is a copy: changing it leaves the figures alone
    assert getattr(made, cls.names()[0]) == values[0]


def test_a_usage_row_is_its_group_then_its_figures_then_its_coverage():
    figures = UsageFigures(2.0, 1.0, 0.5, 0.5, Decimal("8"), Decimal("2"), 0.0)
    row = UsageRow({"team": "vision", "day": "2026-11-25"}, figures, 0.75)
    assert list(row.as_dict()) == ["team", "day", *UsageFigures.names(), "coverage"]
    assert row.as_dict() == {"team": "vision", "day": "2026-11-25", **figures.as_dict(), "coverage": 0.75}


@pytest.mark.parametrize("sums", SUMS)
def test_figures_of_sums_are_each_field_by_the_one_rule(sums):
    exact = UsageFigures.of_sums(sums)
    hours = [float(v or 0.0) for v in (sums[0], sums[1], sums[2], sums[3], sums[6])]
    assert exact == UsageFigures(*hours[:4], money.micro(sums[4]), money.micro(sums[5]), hours[4])
    rounded = UsageFigures.of_sums(sums, rounded=True)
    assert rounded == exact.rounded()
    assert all(getattr(rounded, n) == round_hours(getattr(exact, n)) for n in UsageFigures.names()
               if n not in ("cost", "idle_cost"))
    assert all(type(getattr(rounded, n)) is float for n in UsageFigures.names() if n not in ("cost", "idle_cost"))


@pytest.mark.parametrize("value", [Decimal("12.3456785"), Decimal("12.3456795"), Decimal("-0.0000005"), Decimal(7),
                                   Decimal("1E+3"), 12.3456785, 3, "0.0000025", None])
def test_money_at_the_micro_dollar_from_any_stored_type(value):
    expected = money.to_decimal(value).quantize(money.MICRO, rounding=ROUND_HALF_EVEN)
    assert money.micro(value) == expected
    assert money.micro(value).as_tuple().exponent == -6


def test_the_exact_sum_of_rows_of_sums_is_order_free_and_exact_to_the_micro_dollar():
    rows = [s for s in SUMS if s[0] is not None or s[4] is not None] + [SUMS[1]]
    total = UsageFigures.exact_sum(rows)
    assert total == UsageFigures.exact_sum(list(reversed(rows)))
    assert total.cost == sum((money.micro(s[4]) for s in rows), Decimal(0))
    assert total.allocated_gpu_hours == 8694.5198787775 + 1 + (0.1 + 0.2)  # fsum: exact, then rounded once
    assert UsageFigures.exact_sum([]) == UsageFigures()
    figures = [UsageFigures.of_sums(s) for s in SUMS]
    assert UsageFigures.exact_sum([tuple(f.as_dict().values()) for f in figures]) == UsageFigures.exact_sum(SUMS)
