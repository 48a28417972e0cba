"""Nothing that answers for a period computes its bounds itself: the pages, the API, the findings page, the reports'
archive and views take them from the one period rule (apps/common/periods.py).

An `ast` walk over those modules refuses the three ways a window used to be made by hand: `timedelta(days=...)`
or `timedelta(weeks=...)` arithmetic, midnight by `.replace(hour=...)`, and the old range parser `parse_range`
(its default ended at midnight while the pages' included today).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Every module that answers for a period: pages, APIs, the findings page, the report archive.
# Not the capacity API: its snapshot ranges of fragmentation and pending work (default: the last day up to now) are
# not ledger periods.
READERS = sorted({
    *ROOT.glob("apps/dashboard/**/*.py"),
    *ROOT.glob("apps/*/api/*.py"),
    ROOT / "apps/findings/views.py",
    ROOT / "apps/reports/views.py",
    ROOT / "apps/reports/archive.py",
} - {ROOT / "apps/capacity/api/views.py"})


def window_arithmetic(source: str) -> list[str]:
    """Where `source` makes window bounds by hand: `line: what`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            keywords = {k.arg for k in node.keywords}
            if name == "timedelta" and (keywords & {"days", "weeks"} or node.args):
                found.append(f"{node.lineno}: timedelta({', '.join(sorted(k for k in keywords if k))})")
            if name == "replace" and "hour" in keywords:
                found.append(f"{node.lineno}: .replace(hour=...)")
        if isinstance(node, ast.ImportFrom) and any(a.name == "parse_range" for a in node.names):
            found.append(f"{node.lineno}: imports parse_range")
    return found


def test_the_scan_finds_each_way_of_computing_bounds_by_hand():
    source = """
from datetime import timedelta
from apps.common.params import parse_range
end = now.replace(hour=0, minute=0) + timedelta(days=1)
start = end - timedelta(7)
"""
    assert [f.split(": ")[1] for f in window_arithmetic(source)] == [
        "imports parse_range", ".replace(hour=...)", "timedelta(days)", "timedelta()"]
    assert window_arithmetic("w = read_window(params, now, max_days=400)\nstep = timedelta(hours=1)") == []


@pytest.mark.parametrize("path", READERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_reader_of_a_period_computes_its_bounds(path):
    assert window_arithmetic(path.read_text()) == [], f"{path.relative_to(ROOT)}: use apps.common.periods"


def test_split_days_cuts_a_range_into_whole_days_and_the_partial_days_at_its_edges():
    from datetime import UTC, datetime

    from apps.common.periods import DaySplit, split_days

    def t(day: int, hour: int = 0) -> datetime:
        return datetime(2026, 11, day, hour, tzinfo=UTC)

    assert split_days(t(23), t(30)) == DaySplit((t(23), t(30)), ())
    assert split_days(t(23, 5), t(25, 19)) == DaySplit((t(24), t(25)), ((t(23, 5), t(24)), (t(25), t(25, 19))))
    assert split_days(t(23, 5), t(25)) == DaySplit((t(24), t(25)), ((t(23, 5), t(24)),))
    assert split_days(t(23, 5), t(23, 9)) == DaySplit(None, ((t(23, 5), t(23, 9)),))
    assert split_days(t(23, 5), t(24, 9)) == DaySplit(None, ((t(23, 5), t(24, 9)),))  # no whole day inside
    assert split_days(t(23, 5), t(23, 5)) == DaySplit(None, ())
