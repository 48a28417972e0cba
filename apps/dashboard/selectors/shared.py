"""What every dashboard page shares: the usage report for the page's scope, links, the status badge, the filters,
tiles, the rows of tables and charts (typed figures in, display rows out) and the buckets of the charts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from django.urls import reverse
from django.utils import timezone

from apps.common.timeutils import HOUR, iso_week_start
from apps.dashboard.scope import Scope, Window
from apps.reports.periods import Period, period_state
from apps.usage.figures import UsageFigures
from apps.usage.selectors import UsageReport, data_as_of, usage_report

NO_WORKLOAD = "~"  # the URL segment of rows whose workload was not recorded
# How GPUs were handed out (gpus.AllocationMode), as the pages and the glossary (#allocation-mode) name them.
MODE_LABELS = {"device_plugin": "Device plugin", "time_slice": "Time-slice", "mig": "MIG", "dra": "DRA claim",
               "hami": "HAMi fraction"}


def mode_labels(modes: Sequence[str]) -> str:
    """Allocation modes as the pages print them, in the vocabulary's order ("DRA claim, MIG")."""
    order = list(MODE_LABELS)
    known = sorted({m for m in modes if m in MODE_LABELS}, key=order.index)
    return ", ".join([MODE_LABELS[m] for m in known] + sorted({m for m in modes if m not in MODE_LABELS}))
NOTE = ("Activity signal: {signal}. Cost = GPU-hours held x the price card's USD per GPU-hour for the model, fixed "
        "when the hour was recorded; idle in allocations = GPU-hours held x (1 - activity). Unmeasured hours (no "
        "DCGM series for the pod) are neither working nor idle.")


def report(scope: Scope, group_by: list[str], *, window: Window | None = None, signal: str | None = None,
           filters: Mapping[str, Sequence[str]] | None = None) -> UsageReport:
    """`usage_report` for the page's scope (what `/api/v1/usage/` answers for the same parameters)."""
    w = window or scope.window
    return usage_report(start=w.start, end=w.end, group_by=group_by, signal=signal or scope.signal,
                        visible_teams=scope.visible_teams,
                        filters=scope.usage_filters if filters is None else filters)


def teams_in_scope(scope: Scope) -> set[str] | None:
    """The teams a read may cover: the visible ones, narrowed by `?team=` (for selectors without a team filter)."""
    if scope.filters.get("team"):
        return set(scope.filters["team"])
    return scope.visible_teams


def plain_query(scope: Scope, **overrides: object) -> str:
    """The scope's query string for a link to another page (without one page's own table parameters)."""
    return scope.query(sort=None, order=None, busy_below=None, page=None, **overrides)


def workload_url(cluster: str, namespace: str, workload: str) -> str:
    return reverse("dashboard:workload", args=[cluster, namespace, workload or NO_WORKLOAD])


def figures_row(figures: UsageFigures, /, **keys: Any) -> dict[str, Any]:
    """A table or chart row of usage figures: `keys`, the figures, and what they derive: activity (working share
    of measured hours), idle share and coverage."""
    return {**keys, **figures.as_dict(), "activity": figures.activity, "idle_share": figures.idle_share,
            "coverage": figures.coverage}


def status(scope: Scope, now: datetime | None = None) -> dict[str, Any]:
    """Provisional or final, and why: final once the period is over and every hour of it is final for every
    cluster (the reports' rule, `period_state`), with the data's freshness."""
    now = now or timezone.now()
    w = scope.window
    state = period_state(w.period or Period(w.start, w.end, "custom", w.label), now)
    if state.final:
        reason = "every hour of it is collected and final"
    elif not state.clusters:
        reason = "nothing was being collected in it"
    elif not state.ended:
        elapsed = max(0, min(int((now - w.start) / HOUR), int(w.length / HOUR)))
        reason = f"the {w.noun} is not over ({elapsed:,} of {int(w.length / HOUR):,} hours so far)"
        # Past hours no bucket holds yet (a first collection, or the demo's backfill): the totals lack them.
        missing = max(c.missing for c in state.clusters)
        if missing:
            reason += f"; {missing:,} of its past hours are not collected yet"
    else:
        reason = state.reason() or ""
    return {"final": state.final, "label": "final" if state.final else "provisional", "reason": reason,
            "ratio": state.ratio, "as_of": data_as_of(visible_teams=scope.visible_teams)}


def filter_options(scope: Scope) -> dict[str, list[str]]:
    """The values each filter can take in the period, for the teams the caller may see (from all of the period's
    rows, not the current page)."""
    keys = ["team", "namespace", "cluster", "node_group", "gpu_model"]
    rep = report(scope, keys, filters={})
    return {k: sorted({r.group[k] for r in rep.results}) for k in keys}


def filter_warnings(scope: Scope, options: Mapping[str, list[str]]) -> list[str]:
    """A message per filter value with no GPU-hours in the period (the page then shows its empty state)."""
    out = []
    for key, values in scope.filters.items():
        missing = [v for v in values if v not in options.get(key, ())]
        if missing:
            whose = "" if scope.sees_all else " for the teams you can see"
            out.append(f"No GPU-hours match {key.replace('_', ' ')} {', '.join(missing)} in "
                       f"{scope.window.caption()}{whose}.")
    return out


def tile(label: str, value: Any, kind: str, term: str, *, delta: dict[str, Any] | None = None, note: str = "",
         url: str = "") -> dict[str, Any]:
    return {"label": label, "value": value, "kind": kind, "term": term, "change": delta, "note": note, "url": url}


def empty_text(scope: Scope, what: str) -> str:
    """What an empty table means: nothing visible yet, nothing matching the filters, or nothing in the period."""
    if scope.visible_teams is not None and not scope.visible_teams:
        return (f"No {what} are visible to you: you are not on any team yet. Ask an administrator to add you "
                "(manage.py add_team_member TEAM USER).")
    if scope.filtered:
        return f"No {what} match the filters in {scope.window.caption()}."
    return f"No {what} with GPU-hours in {scope.window.caption()}."


# ---- Buckets of the charts ----


def bucket_time(key: str, value: str) -> str:
    """A bucket label Plotly reads as a date, in UTC."""
    return value[:16].replace("T", " ") if key == "hour" else value


def week_of(day: str) -> str:
    """The Monday (UTC) of the ISO week of a day, as a bucket label."""
    return iso_week_start(datetime.fromisoformat(day).replace(tzinfo=UTC)).strftime("%Y-%m-%d")


def bucket_rows(scope: Scope, *, signal: str | None = None, filters: Mapping[str, Sequence[str]] | None = None,
                bucket: str | None = None) -> list[dict[str, Any]]:
    """Usage per chart bucket (hour, day or ISO week, as the period's length asks, unless `bucket` is given)."""
    bucket = bucket or scope.window.bucket
    key = "hour" if bucket == "hour" else "day"
    rep = report(scope, [key], signal=signal, filters=filters)
    if bucket != "week":
        return [figures_row(r.figures, t=bucket_time(key, r.group[key])) for r in rep.results]
    weeks: dict[str, UsageFigures] = {}
    for r in rep.results:
        monday = week_of(r.group["day"])
        weeks[monday] = weeks.get(monday, UsageFigures()) + r.figures
    return [figures_row(v, t=t) for t, v in sorted(weeks.items())]


def bucket_label(window: Window, bucket: str | None = None) -> str:
    return {"hour": "Hour (UTC)", "day": "Day (UTC)", "week": "ISO week starting (UTC)"}[bucket or window.bucket]
