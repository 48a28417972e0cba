"""The money rules (ledger.md "Money"): exact decimal from storage to e-mail, and printed figures that add up.

* A ledger row's cost is GPU-hours x price, quantized to the micro-dollar (`MICRO`) when the row is written;
  every rollup and total is an exact decimal sum of such rows, so no order of summing changes a cent.
* What is printed in cents (the e-mail, its CSV, FOCUS) is apportioned: the total is rounded once, and the
  rows are rounded so that they add up to it exactly (largest remainder). A printed total is always the
  sum of the printed rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import ROUND_FLOOR, ROUND_HALF_EVEN, Decimal

MICRO = Decimal("0.000001")
CENT = Decimal("0.01")
ZERO = Decimal(0)


def cost(gpu_hours: float, price: Decimal | None) -> Decimal | None:
    """GPU-hours x USD per GPU-hour, to the micro-dollar; None when the GPU model has no price."""
    if price is None:
        return None
    # repr() is the shortest decimal that is exactly this float: no binary noise enters the money.
    return (Decimal(repr(float(gpu_hours))) * price).quantize(MICRO, rounding=ROUND_HALF_EVEN)


# What a database hands back for a money column or aggregate: Decimal (PostgreSQL), float or int (SQLite
# aggregates), text (JSON), NULL.
StoredMoney = Decimal | float | int | str | None


def to_decimal(value: StoredMoney) -> Decimal:
    """A stored money value (Decimal, or whatever a database aggregate returns) as a Decimal."""
    if value is None:
        return ZERO
    if isinstance(value, Decimal):
        return value
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


def micro(value: StoredMoney) -> Decimal:
    """A money value at the ledger's precision (what the API prints)."""
    if value.__class__ is Decimal:  # what PostgreSQL gives: every row of a usage answer passes here twice
        return value.quantize(MICRO, rounding=ROUND_HALF_EVEN)  # type: ignore[union-attr]
    return to_decimal(value).quantize(MICRO, rounding=ROUND_HALF_EVEN)


def cents(value: StoredMoney) -> Decimal:
    """One figure rounded to the cent (half to even)."""
    return to_decimal(value).quantize(CENT, rounding=ROUND_HALF_EVEN)


def apportion(values: Sequence[StoredMoney], total: StoredMoney = None, *, quantum: Decimal = CENT) -> list[Decimal]:
    """Round `values` to cents (or `quantum`) so that they add up exactly to `total` rounded the same way.

    `total` defaults to the exact sum of `values`. Each value is floored to the cent, then the cents left
    over go to the largest remainders (ties to the earlier row), as invoices apportion. With every value
    non-negative, each printed value is within one cent of the exact one. (`quantum=MICRO` spreads a bill
    line over node-hours at the ledger's precision, apps/billing.)
    """
    exact = [to_decimal(v) for v in values]
    target = to_decimal(sum(exact, ZERO) if total is None else total).quantize(quantum, rounding=ROUND_HALF_EVEN)
    floors = [v.quantize(quantum, rounding=ROUND_FLOOR) for v in exact]
    left = int((target - sum(floors, ZERO)) / quantum)
    order = sorted(range(len(exact)), key=lambda i: (-(exact[i] - floors[i]), i))
    out = list(floors)
    if not order:
        return out
    # |left| cents go round `order` (from the largest remainder; taken back from the smallest when negative):
    # every row gets `rounds` of them, the first `extra` rows one more. Arithmetic, not one step per cent:
    # inconsistent data (a total far from the rows' sum) must not cost a loop iteration per cent.
    step = quantum if left >= 0 else -quantum
    rounds, extra = divmod(abs(left), len(order))
    ranked = order if left >= 0 else order[::-1]
    for position, i in enumerate(ranked):
        out[i] += step * (rounds + (1 if position < extra else 0))
    return out
