"""`/savings/`: the ranked savings the viewer may see (team leads their teams, finance every team) over the
page's period, with each team's total per month. Views call selectors only."""

from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from apps.accounts.selectors import visible_team_names
from apps.common.periods import page_window, quick_windows
from apps.inventory.selectors import visible_clusters, visible_team_rows
from apps.savings.selectors import savings_list
from apps.usage.figures import apportion_places
from apps.usage.money import CENT, cents


def _text(value: str | None) -> str | None:
    value = (value or "").strip()
    return value[:253] if value and value.isprintable() else None


@login_required
def savings_page(request: HttpRequest) -> HttpResponse:
    teams = visible_team_names(request.user)
    get = request.GET
    now = timezone.now()
    window, errors = page_window(get, now, max_days=settings.GPUFINOPS_API_MAX_RANGE_DAYS,
                                 max_hourly_days=settings.GPUFINOPS_API_MAX_HOURLY_DAYS)
    team, cluster = _text(get.get("team")), _text(get.get("cluster"))
    if team and teams is not None and team not in teams:
        errors.append(f"Team {team} is not visible to you: showing your teams.")
        team = None
    found = savings_list(visible_teams=teams, start=window.start, end=window.end, team=team, cluster=cluster)
    # The printing rule (apps.usage.figures): printed rows add up to the printed total.
    total = cents(found.monthly)
    printed = apportion_places([s.monthly for s in found.items], total, CENT)
    team_printed = apportion_places([t.monthly for t in found.teams], total, CENT)
    filters = [(k, v) for k, v in (("team", team), ("cluster", cluster)) if v]
    periods = [(label, urlencode([*w.params, *filters]), w.params == window.params) for label, w in quick_windows(now)]
    return render(request, "savings/index.html", {
        "items": list(zip(found.items, printed, strict=True)), "teams_total": list(zip(found.teams, team_printed,
                                                                                          strict=True)),
        "total": total, "period_cost": cents(found.period_cost), "period_hours": found.period_hours,
        "window": window, "window_params": list(window.params), "periods": periods, "errors": errors,
        "team": team, "cluster": cluster, "sees_all": teams is None,
        "teams": list(visible_team_rows(visible_teams=teams).values_list("name", flat=True)),
        "clusters": list(visible_clusters(visible_teams=teams).values_list("name", flat=True)),
        "csv_query": urlencode([*window.params, *filters, ("format", "csv")]),
    })
