"""The figures every reader of the ledger shares, and the rules that print them.

The usage selectors produce these (`apps.usage.selectors`); the API renders them (`as_dict`, the JSON of
`/api/v1/usage/`), the reports and the dashboard print them. GPU-hours are floats (summed with `math.fsum`,
kept to a millionth), money is exact `Decimal` to the micro-dollar (`apps.usage.money`), printed figures are
`Decimal` at the cent or 0.1.

Printing rules (ledger.md "Money", docs/reports.md "Rounding"): a printed total is the sum of its printed
rows. Rows are apportioned to the printed total by largest remainder (`apportion_places`, `PrintedRows`),
shares to 100.0 % (`printed_shares`); a change against the previous period is the difference of printed
figures (`change`), a change against the average of earlier periods is rounded from exact figures
(`change_from_average`). The pages show GPU-hours as Python prints a float (`as_shown`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from decimal import ROUND_HALF_EVEN, Decimal
from functools import cache
from typing import Any, Literal, Self

from apps.usage import money

MONEY_FIELDS = frozenset({"cost", "idle_cost", "capacity_cost", "unallocated_cost"})
# Output precision of GPU-hours: a millionth. Money is exact decimal to the micro-dollar (apps/usage/money.py).
DECIMALS = 6
TENTH = Decimal("0.1")
HUNDRED = Decimal(100)

Unit = Literal["usd", "gpuh"]
Amount = Decimal | float | int  # a figure: money (Decimal) or GPU-hours (float), as exact as it is


def round_hours(value: float | None) -> float:
    """GPU-hours at the output precision (a millionth); a missing sum is 0."""
    return round(float(value or 0.0), DECIMALS)


def coverage(allocated: float, unmeasured: float) -> float | None:
    """Attribution coverage: the measured share of allocated GPU-hours; None when nothing was allocated."""
    if allocated <= 0:
        return None
    return round(max(0.0, min(1.0, 1.0 - unmeasured / allocated)), DECIMALS)


def busy_share(working: float, idle: float) -> float | None:
    """Activity: the working share of the measured GPU-hours (unmeasured hours are left out, never guessed)."""
    measured = working + idle
    return working / measured if measured else None


@dataclass(frozen=True)
class _Figures:
    """Figures that add up field by field: a table's total is its rows added one after the other."""

    @classmethod
    @cache
    def names(cls) -> tuple[str, ...]:
        """The fields' names in order, read once per class (`dataclasses.fields` at every row of every answer
        showed in the API's profile)."""
        return tuple(f.name for f in fields(cls))

    def __add__(self, other: Self) -> Self:
        return replace(self, **{name: getattr(self, name) + getattr(other, name) for name in self.names()})

    @classmethod
    def fold(cls, parts: Iterable[Self]) -> Self:
        """The figures added one after the other (what a page's table totals), zero without any."""
        total = cls()
        for part in parts:
            total = total + part
        return total

    def as_dict(self) -> dict[str, float | Decimal]:
        """The figures by name, in the API's order (USAGE_FIELDS, CAPACITY_FIELDS)."""
        # The instance's own attributes are exactly its fields, set in field order by the dataclass __init__ (also
        # through `replace` and unpickling): copying them is about ten times cheaper than reading each by name, and
        # an API answer builds this for each of its rows (tests/usage/test_figures.py checks the order).
        return dict(self.__dict__)


@dataclass(frozen=True)
class UsageFigures(_Figures):
    """A usage row's or total's figures under one activity signal (ledger.md): allocated = working + idle +
    unmeasured GPU-hours; cost and idle cost in USD; allocated hours on GPU models without a price."""

    allocated_gpu_hours: float = 0.0
    working_gpu_hours: float = 0.0
    idle_gpu_hours: float = 0.0
    unmeasured_gpu_hours: float = 0.0
    cost: Decimal = money.ZERO
    idle_cost: Decimal = money.ZERO
    unpriced_gpu_hours: float = 0.0

    @classmethod
    def of_sums(cls, sums: Sequence[Any], *, rounded: bool = False) -> UsageFigures:
        """Figures from summed columns in field order, as a database returns them (float, Decimal, int, text or
        NULL: 0): GPU-hours as floats (at the output precision when `rounded`), money at the micro-dollar.
        Written out rather than `of_sums(...).rounded()`: every row of every usage answer passes here."""
        allocated, working, idle, unmeasured, cost, idle_cost, unpriced = sums
        if rounded:
            return cls(round(float(allocated or 0.0), DECIMALS), round(float(working or 0.0), DECIMALS),
                       round(float(idle or 0.0), DECIMALS), round(float(unmeasured or 0.0), DECIMALS),
                       money.micro(cost), money.micro(idle_cost), round(float(unpriced or 0.0), DECIMALS))
        return cls(float(allocated or 0.0), float(working or 0.0), float(idle or 0.0), float(unmeasured or 0.0),
                   money.micro(cost), money.micro(idle_cost), float(unpriced or 0.0))

    @classmethod
    def exact_sum(cls, sums: Sequence[Sequence[Any]]) -> UsageFigures:
        """The sum the ledger answers of rows of summed columns in field order (as `of_sums` reads them, or a
        figures' `as_dict().values()`): GPU-hours with `math.fsum` (independent of order), money exactly at the
        micro-dollar."""

        def hours(k: int) -> float:
            return math.fsum(float(row[k] or 0.0) for row in sums)

        def usd(k: int) -> Decimal:
            return sum((money.micro(row[k]) for row in sums), money.ZERO)

        return cls(hours(0), hours(1), hours(2), hours(3), usd(4), usd(5), hours(6))

    def rounded(self) -> UsageFigures:
        """GPU-hours at the output precision (money is already exact to the micro-dollar)."""
        return UsageFigures(
            round_hours(self.allocated_gpu_hours),
            round_hours(self.working_gpu_hours),
            round_hours(self.idle_gpu_hours),
            round_hours(self.unmeasured_gpu_hours),
            self.cost,
            self.idle_cost,
            round_hours(self.unpriced_gpu_hours),
        )

    @property
    def activity(self) -> float | None:
        return busy_share(self.working_gpu_hours, self.idle_gpu_hours)

    @property
    def idle_share(self) -> float | None:
        """Idle share of the GPU-hours held."""
        return self.idle_gpu_hours / self.allocated_gpu_hours if self.allocated_gpu_hours else None

    @property
    def coverage(self) -> float | None:
        return coverage(self.allocated_gpu_hours, self.unmeasured_gpu_hours)


@dataclass(frozen=True)
class CapacityFigures(_Figures):
    """Capacity of node groups (ledger.md "Capacity"): capacity = allocated + unallocated GPU-hours, unavailable
    hours a part of unallocated; capacity hours of nodes without a price; capacity cost = what the pods were
    charged + unallocated cost, exactly. Capacity belongs to no team."""

    capacity_gpu_hours: float = 0.0
    unallocated_gpu_hours: float = 0.0
    unavailable_gpu_hours: float = 0.0
    unpriced_gpu_hours: float = 0.0
    capacity_cost: Decimal = money.ZERO
    unallocated_cost: Decimal = money.ZERO

    @classmethod
    def from_sums(cls, sums: Mapping[str, float | Decimal | None]) -> CapacityFigures:
        """Database sums (None for no rows) at the output precision: money to the micro-dollar."""
        return cls(
            round_hours(_float(sums["capacity_gpu_hours"])),
            round_hours(_float(sums["unallocated_gpu_hours"])),
            round_hours(_float(sums["unavailable_gpu_hours"])),
            round_hours(_float(sums["unpriced_gpu_hours"])),
            money.micro(sums["capacity_cost"]),
            money.micro(sums["unallocated_cost"]),
        )


# The figures of every usage and capacity row in the API's (and the CSV's) column order: the fields' order.
USAGE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(UsageFigures))
CAPACITY_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(CapacityFigures))


def _float(value: float | Decimal | None) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class UsageRow:
    """One row of a usage answer: its group (the `group_by` keys' values, in that order) and its figures.
    `coverage` is the row's attribution coverage from its unrounded sums (the figures are rounded)."""

    group: Mapping[str, str]
    figures: UsageFigures
    coverage: float | None

    def as_dict(self) -> dict[str, object]:
        """The API's row: the group keys, the figures, the coverage."""
        return {**self.group, **self.figures.__dict__, "coverage": self.coverage}  # as_dict, without a copy


@dataclass(frozen=True)
class CapacityRow:
    """Capacity of one group (cluster, node group, GPU model, day or hour) over a range."""

    group: Mapping[str, str]
    figures: CapacityFigures


# ---- Printing: figures as the e-mail and the pages print them, adding up ----


def round_to(value: Amount | None, places: Decimal) -> Decimal:
    """One figure at `places` (half to even), GPU-hour floats by their shortest repr."""
    return money.to_decimal(value).quantize(places, rounding=ROUND_HALF_EVEN)


def pct(part: Amount, whole: Amount) -> Decimal | None:
    """part / whole in percent at 0.1; None when whole is zero."""
    denominator = money.to_decimal(whole)
    if denominator == 0:
        return None
    return round_to(money.to_decimal(part) / denominator * HUNDRED, TENTH)


def apportion_places(values: Sequence[Amount], total: Amount, places: Decimal) -> list[Decimal]:
    """`money.apportion` at another precision (0.1 for GPU-hours and percentages): rows add up to the total."""
    scale = money.CENT / places
    scaled = money.apportion([money.to_decimal(v) * scale for v in values], money.to_decimal(total) * scale)
    return [(v / scale).quantize(places) for v in scaled]


def printed_shares(values: Sequence[Decimal], total: Decimal) -> list[Decimal | None]:
    """Each printed value's share of the printed total in percent at 0.1, adding up to 100.0 (None without a
    total)."""
    if not total:
        return [None] * len(values)
    return list(apportion_places([v / total * HUNDRED for v in values], HUNDRED, TENTH))


def as_shown(value: float | Decimal | None, unit: Unit) -> Decimal:
    """A figure as a page shows it: money in cents; GPU-hours as `{:,.1f}` rounds the float (its binary value,
    which a decimal rounding of its repr can differ from at a tie), so a change is the difference of what is
    shown."""
    if unit == "usd":
        return money.cents(value)
    return money.to_decimal(round(float(value or 0), 1)).quantize(TENTH)


def average(values: Sequence[Amount]) -> Decimal | None:
    """The exact mean of figures; None without any."""
    if not values:
        return None
    return sum((money.to_decimal(v) for v in values), money.ZERO) / len(values)


@dataclass(frozen=True)
class Change:
    """A figure's change against a comparison: `amount` in the figure's unit and `percent` of the comparison at
    0.1. Without a comparison both are None, and `reason` says why when it is known (a period without enough
    final hours); against zero the percent is None and the figure is `new` when it is not zero itself."""

    amount: Decimal | None = None
    percent: Decimal | None = None
    new: bool = False
    reason: str | None = None

    @property
    def delta(self) -> str | None:
        """The amount as printed (a signed decimal string)."""
        return None if self.amount is None else str(self.amount)

    @property
    def delta_pct(self) -> str | None:
        """The percent as printed: a decimal string, "new", or None."""
        if self.new:
            return "new"
        return None if self.percent is None else str(self.percent)


def change(current: Decimal, previous: Decimal | None) -> Change:
    """The change of a printed figure against a printed comparison (so changes add up like the figures)."""
    if previous is None:
        return Change()
    amount = current - previous
    if previous == 0:
        return Change(amount, None, new=bool(current))
    return Change(amount, round_to(amount / previous * HUNDRED, TENTH))


# ---- Comparable coverage: a change is shown only against a period measured about as fully as this one ----


def not_comparable(final_share: float | None, minimum: float) -> str | None:
    """Why a period cannot be compared with (None when it can): it has no collected hour, or fewer than `minimum`
    (a share, GPUFINOPS_COMPARE_MIN_FINAL) of its hours are final. "+945 % vs a week holding 15 hours of data"
    compares coverage, not spending."""
    if final_share is None or final_share <= 0:
        return "no data"
    if final_share < minimum:
        return (f"only {round_to(final_share * 100, TENTH)} % of its hours final "
                f"(needs {round_to(minimum * 100, TENTH).normalize():f} %)")
    return None


def change_if_comparable(current: Decimal, previous: Decimal | None, final_share: float | None,
                         minimum: float) -> Change:
    """`change` against the previous period when its coverage is comparable, else no change and why."""
    reason = not_comparable(final_share, minimum)
    if reason is not None or previous is None:
        return Change(reason=reason or "no data")
    return change(current, previous)


@dataclass(frozen=True)
class CoveredAverage:
    """The mean of the comparison periods with comparable coverage, and how many of them it counts."""

    mean: Decimal | None
    count: int
    of: int


def covered_average(values: Sequence[Amount], final_shares: Sequence[float | None],
                    minimum: float) -> CoveredAverage:
    """The average over the periods whose coverage is comparable (`not_comparable` is None); the others are left
    out, never counted as zero."""
    kept = [v for v, share in zip(values, final_shares, strict=True) if not_comparable(share, minimum) is None]
    return CoveredAverage(average(kept), len(kept), len(values))


def change_from_average(exact: Decimal, mean: Decimal | None) -> Change:
    """The change of an exact money figure against an exact average, rounded once: the amount to the cent, the
    percent at 0.1."""
    if mean is None:
        return Change()
    amount = money.cents(exact - mean)
    if mean == 0:
        return Change(amount, None, new=bool(exact))
    return Change(amount, round_to((exact - mean) / mean * HUNDRED, TENTH))


@dataclass(frozen=True)
class PrintedRows:
    """One period's rows and totals as printed (cents; GPU-hours at 0.1), adding up.

    With the fleet's capacity, [charged to teams, unallocated] are apportioned to the printed capacity, then
    the rows to the printed charged: charged + unallocated = total. Without it, the rows are apportioned to the
    teams' total, and charged = total.
    """

    costs: tuple[Decimal, ...]
    hours: tuple[Decimal, ...]
    charged: Decimal
    charged_hours: Decimal
    unallocated: Decimal | None
    unallocated_hours: Decimal | None
    total: Decimal
    total_hours: Decimal

    @classmethod
    def of(cls, rows: Sequence[UsageFigures], totals: UsageFigures,
           capacity: CapacityFigures | None = None) -> PrintedRows:
        """The printed figures of `rows` (their total is `totals`), with the unallocated row when `capacity` is
        given."""
        costs = [r.cost for r in rows]
        hours = [r.allocated_gpu_hours for r in rows]
        if capacity is not None:
            total = money.cents(capacity.capacity_cost)
            charged, unallocated = money.apportion([totals.cost, capacity.unallocated_cost], total)
            total_hours = round_to(capacity.capacity_gpu_hours, TENTH)
            charged_hours, unallocated_hours = apportion_places(
                [totals.allocated_gpu_hours, capacity.unallocated_gpu_hours], total_hours, TENTH)
            return cls(tuple(money.apportion(costs, charged)), tuple(apportion_places(hours, charged_hours, TENTH)),
                       charged, charged_hours, unallocated, unallocated_hours, total, total_hours)
        total = money.cents(totals.cost)
        total_hours = round_to(totals.allocated_gpu_hours, TENTH)
        return cls(tuple(money.apportion(costs, total)), tuple(apportion_places(hours, total_hours, TENTH)),
                   total, total_hours, None, None, total, total_hours)

    def with_unallocated(self) -> list[Decimal]:
        """The printed costs of the rows, then the unallocated row's when there is one."""
        return [*self.costs, *([self.unallocated] if self.unallocated is not None else [])]
