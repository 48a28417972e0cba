"""The report archive as the API and the reports page show it: every period's editions (status, version,
totals, digests) a person may see, the due periods, and the exact stored files."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from apps.accounts.selectors import visible_team_names
from apps.inventory.selectors import visible_clusters
from apps.reports.content import Scope, build_content, forecast_json, month_forecast
from apps.reports.models import ReportEdition
from apps.reports.periods import KINDS, MONTHLY, Period, last_complete, parse_period, period_containing, period_state
from apps.reports.selectors import editions_visible_to

SUMMARY_FIELDS = ("kind", "period", "period_start", "period_end", "scope", "scope_teams", "version", "status",
                  "figures", "content_sha256", "csv_name", "csv_sha256", "focus_name", "focus_sha256", "created_at",
                  "previous_id")


class ChooseScope(ValueError):
    """Several scopes of the period are visible and none was asked for: `choices` lists them."""

    def __init__(self, choices: list[str]) -> None:
        super().__init__(f"this period has several editions you may see; choose one with scope= ({', '.join(choices)})")
        self.choices = choices


def totals(figures: dict[str, Any]) -> dict[str, Any]:
    """The edition's totals: exact (as the API's usage answer has them) and as printed in the e-mail."""
    t = figures["totals"]
    h = figures["headline"]
    out = {
        "cost": t["cost"], "idle_cost": t["idle_cost"], "allocated_gpu_hours": t["allocated_gpu_hours"],
        "working_gpu_hours": t["working_gpu_hours"], "idle_gpu_hours": t["idle_gpu_hours"],
        "unmeasured_gpu_hours": t["unmeasured_gpu_hours"], "unpriced_gpu_hours": t["unpriced_gpu_hours"],
        "printed": {"charged": h["charged_printed"], "idle_cost": h["idle_cost_printed"],
                    "total": figures["total_row"]["cost_printed"]},
    }
    cap = figures.get("capacity")
    if cap:
        out.update({"capacity_cost": cap["capacity_cost"], "unallocated_cost": cap["unallocated_cost"],
                    "capacity_gpu_hours": cap["capacity_gpu_hours"],
                    "unallocated_gpu_hours": cap["unallocated_gpu_hours"]})
        out["printed"].update({"capacity_cost": h["capacity_cost_printed"], "unallocated": h["unallocated_printed"]})
    return out


def file_urls(period: str, scope: str, version: int | None) -> dict[str, str]:
    query = f"?scope={scope}" + (f"&version={version}" if version else "")
    return {"csv": f"/api/v1/reports/{period}/csv{query}", "focus": f"/api/v1/reports/{period}/focus{query}"}


def edition_summary(e: ReportEdition) -> dict[str, Any]:
    f = e.figures
    return {
        "period": e.period, "kind": e.kind, "start": e.period_start, "end": e.period_end,
        "scope": e.scope, "scope_teams": e.scope_teams, "version": e.version, "status": e.status,
        "made": e.created_at, "previous_version": f.get("previous_version"),
        "coverage": f["coverage"]["ratio"], "totals": totals(f),
        "csv_name": e.csv_name, "csv_sha256": e.csv_sha256, "focus_name": e.focus_name,
        "focus_sha256": e.focus_sha256, "content_sha256": e.content_sha256, "files": file_urls(e.period, e.scope,
                                                                                                e.version),
    }


def edition_detail(e: ReportEdition) -> dict[str, Any]:
    data = edition_summary(e)
    f = e.figures
    data.update({"coverage": f["coverage"], "rows": f["rows"], "total_row": f["total_row"],
                 "headline": f["headline"], "restatement": f.get("restatement"), "signal": f["signal"],
                 "forecast": f.get("forecast")})
    return data


def caller_scope(user) -> Scope | None:
    """The scope of a report made for this person: all teams for finance and staff, else their teams."""
    visible = visible_team_names(user)
    if visible is None:
        return Scope(None)
    return Scope(frozenset(visible)) if visible else None


def _coverage_for(state_dict: dict, user) -> dict:
    """Coverage as a person may see it: cluster names only of the clusters their teams run on."""
    visible = visible_team_names(user)
    if visible is None:
        return state_dict
    names = {c.name for c in visible_clusters(visible_teams=visible)}
    return {**state_dict, "clusters": [c for c in state_dict["clusters"] if c["cluster"] in names]}


def due_periods(user, now: datetime) -> list[dict[str, Any]]:
    """The last complete week and month that have no final edition the person may see yet: their status."""
    out = []
    for kind in KINDS:
        period = last_complete(kind, now)
        done = editions_visible_to(user, period=period.label).filter(
            status__in=[ReportEdition.Status.FINAL, ReportEdition.Status.RESTATED]).exists()
        if done:
            continue
        state = period_state(period, now)
        out.append({"period": period.label, "kind": kind, "start": period.start, "end": period.end,
                    "status": "final" if state.final else "provisional", "version": None, "sent": False,
                    "coverage": state.ratio, "waiting": state.reason(),
                    "detail": _coverage_for(state.as_dict(), user)})
    return out


def choose_edition(user, period: Period, *, scope: str | None, version: int | None) -> ReportEdition | None:
    """The edition `scope`/`version` asks for (default: the caller's own scope, latest version), among those the
    caller may see; None when there is none. Raises ChooseScope when the default is ambiguous."""
    qs = editions_visible_to(user, period=period.label).filter(kind=period.kind)
    if scope is None:
        scopes = sorted(set(qs.values_list("scope", flat=True)))
        own = caller_scope(user)
        if own is not None and own.key in scopes:
            scope = own.key
        elif len(scopes) == 1:
            scope = scopes[0]
        elif scopes:
            raise ChooseScope(scopes)
        else:
            return None
    qs = qs.filter(scope=scope)
    if version is not None:
        qs = qs.filter(version=version)
    return qs.order_by("-version").first()


@dataclass(frozen=True)
class Due:
    """A period with no edition the caller may see: the report as it would be made now for the caller."""

    period: Period
    scope: Scope
    content: Any
    state: Any

    def detail(self, user) -> dict[str, Any]:
        f = self.content.figures
        return {
            "period": self.period.label, "kind": self.period.kind, "start": self.period.start, "end": self.period.end,
            "scope": self.scope.key, "scope_teams": f["scope"]["teams"], "version": None, "edition": "due",
            "status": "final" if self.state.final else "provisional", "sent": False, "made": None,
            "coverage": _coverage_for(f["coverage"], user), "totals": totals(f),
            "csv_sha256": f["files"]["csv_sha256"], "focus_sha256": f["files"]["focus_sha256"],
            "rows": f["rows"], "total_row": f["total_row"], "headline": f["headline"], "signal": f["signal"],
            "forecast": f.get("forecast"), "files": file_urls(self.period.label, self.scope.key, None),
            "editions": [],
        }


def due_report(user, period: Period, now: datetime, *, scope: str | None) -> Due | None:
    """The caller's report of `period` computed now (nothing stored), when the period has begun."""
    own = caller_scope(user)
    if own is None or period.start > now or (scope is not None and scope != own.key):
        return None
    content = build_content(period, own, now=now)
    return Due(period, own, content, period_state(period, now))


PAGE_ROWS = 200


def page(user, period_text: str | None, *, now: datetime | None = None) -> dict[str, Any]:
    """The reports page: the editions the person may see (optionally of one period), newest first, and the due
    periods."""
    from django.utils import timezone

    now = now or timezone.now()
    period, error = None, None
    if period_text:
        try:
            period = parse_period(period_text)
        except ValueError as exc:
            error = str(exc)
    qs = editions_visible_to(user, period=period.label if period else None).defer("csv_bytes", "focus_bytes")
    editions = [edition_summary(e) for e in qs.order_by("-period_start", "kind", "scope", "-version")[:PAGE_ROWS]]
    visible = visible_team_names(user)
    month = period_containing(MONTHLY, now)
    current = month_forecast(month, Scope(None if visible is None else frozenset(visible)), now)
    return {"editions": editions, "due": due_periods(user, now), "period": period, "error": error,
            "forecast": forecast_json(current, month) if current is not None else None,
            "period_text": period_text or "", "truncated": len(editions) == PAGE_ROWS,
            "sees_all": visible_team_names(user) is None}
