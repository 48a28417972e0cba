"""Number formats of the reports (reference §2.6, §4.3): money at 2 dp with thousands separators, GPU-hours and
percentages at 1 dp, signed changes with an explicit + or -, never colour alone. Values arrive as decimal
strings already rounded (apps/reports/content.py): these functions only format, they never round again.

The e-mails and the dashboard's tables call them; templates reach them as the `reportfmt` filters."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

DASH = "—"


def _dec(value) -> Decimal | None:
    if value is None or value == "":
        return None
    try:
        return Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None


def _group(value: Decimal, places: int) -> str:
    return f"{abs(value):,.{places}f}"


def usd(value) -> str:
    """1234.5 -> $1,234.50; -3 -> -$3.00."""
    d = _dec(value)
    if d is None:
        return DASH
    return ("-" if d < 0 else "") + "$" + _group(d, 2)


def signed_usd(value) -> str:
    """+$1,234.50 / -$3.00 / $0.00."""
    d = _dec(value)
    if d is None:
        return DASH
    sign = "+" if d > 0 else "-" if d < 0 else ""
    return f"{sign}${_group(d, 2)}"


def gpuh(value) -> str:
    """1234.5 -> 1,234.5 (GPU-hours at 0.1)."""
    d = _dec(value)
    if d is None:
        return DASH
    return ("-" if d < 0 else "") + _group(d, 1)


def pct(value) -> str:
    """12.3 -> 12.3 %."""
    d = _dec(value)
    if d is None:
        return DASH
    return f"{d:.1f} %"


def signed_pct(value) -> str:
    """+12.3 % / -4.0 %; "new" when there was nothing to compare with."""
    if value == "new":
        return "new"
    d = _dec(value)
    if d is None:
        return DASH
    sign = "+" if d > 0 else "-" if d < 0 else ""
    return f"{sign}{abs(d):.1f} %"


def ratio_pct(value) -> str:
    """0.987 -> 98.7 % (a ratio in [0, 1])."""
    d = _dec(value)
    if d is None:
        return DASH
    return f"{d * 100:.1f} %"


def arrow(value) -> str:
    """▲ for an increase, ▼ for a decrease (beside the signed figure, never instead of it)."""
    d = _dec(value)
    if d is None or d == 0:
        return ""
    return "▲" if d > 0 else "▼"
