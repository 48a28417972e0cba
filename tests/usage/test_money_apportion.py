"""`money.apportion` hands leftover cents out arithmetically (issue 23: it looped once per cent, 32 s on
inconsistent data): the same rows as the per-cent loop it replaced, for any discrepancy."""

from __future__ import annotations

from decimal import ROUND_FLOOR, Decimal

from hypothesis import given
from hypothesis import strategies as st

from apps.usage import money

CENT = Decimal("0.01")


def per_cent_loop(values: list[Decimal], total: Decimal) -> list[Decimal]:
    """The former implementation, one step per cent: the reference."""
    target = money.cents(total)
    floors = [v.quantize(CENT, rounding=ROUND_FLOOR) for v in values]
    left = int((target - sum(floors, Decimal(0))) / CENT)
    order = sorted(range(len(values)), key=lambda i: (-(values[i] - floors[i]), i))
    out = list(floors)
    step = CENT if left >= 0 else -CENT
    for k in range(abs(left)):
        i = order[k % len(order)] if left >= 0 else order[-1 - k % len(order)]
        out[i] += step
    return out


amounts = st.decimals(min_value=-1000, max_value=1000, places=6, allow_nan=False, allow_infinity=False)


@given(st.lists(amounts, min_size=1, max_size=12), st.decimals(min_value=-5000, max_value=5000, places=4,
                                                                allow_nan=False, allow_infinity=False))
def test_it_gives_exactly_what_the_per_cent_loop_gave(values, total):
    assert money.apportion(values, total) == per_cent_loop(values, total)


def test_a_total_millions_of_cents_away_from_the_rows_is_apportioned_exactly():
    values = [Decimal("1.005"), Decimal("2.5"), Decimal("0.333333")]
    for total in (Decimal("12345678.91"), Decimal("-98765432.10")):
        rows = money.apportion(values, total)
        assert sum(rows) == money.cents(total)
        assert max(rows) - min(rows) <= Decimal("3.00")  # spread evenly, as the loop would have
