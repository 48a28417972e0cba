"""Files made from the ledger: the usage CSV the API serves and the reports attach (one writer for both)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apps.common.csvfile import csv_bytes
from apps.usage.figures import USAGE_FIELDS


def usage_csv(report: Mapping[str, Any]) -> bytes:
    """A usage answer's `results` as CSV: one column per group key, then the figures and coverage."""
    columns = [*report.get("group_by", []), *USAGE_FIELDS, "coverage"]
    return csv_bytes(columns, ([row.get(c) for c in columns] for row in report.get("results", [])))
