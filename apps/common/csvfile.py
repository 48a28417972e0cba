"""Writing CSV that spreadsheets open safely: the one CSV writer every export uses (API, e-mail, FOCUS).

Team, namespace and pod names come from tenants' labels. A cell that begins with `=`, `+`, `-`, `@`, a
tab or a carriage return is a formula to Excel, LibreOffice and Google Sheets (OWASP "CSV injection"):
such text cells are prefixed with a single quote, so they are shown, never evaluated. Numbers are
written as numbers (a negative amount is not text and stays a number).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from decimal import Decimal

FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
_NUMBERS = frozenset({int, float, Decimal, bool})  # exact types, checked first: most cells of an export are numbers


def safe_cell(value: object) -> object:
    """A value as it may go into a cell: None empty, text that would start a formula neutralised."""
    if value.__class__ in _NUMBERS:
        return value
    if value is None:
        return ""
    if isinstance(value, bool | int | float | Decimal):
        return value
    text = str(value)
    if text.startswith(FORMULA_TRIGGERS):
        return "'" + text
    return text


def csv_bytes(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> bytes:
    """UTF-8 CSV with a header row and RFC 4180 line endings (CRLF), every cell through `safe_cell`."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow([safe_cell(c) for c in columns])
    for row in rows:
        writer.writerow([safe_cell(v) for v in row])
    return buffer.getvalue().encode("utf-8")
