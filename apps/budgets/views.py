"""`/budgets/`: every budget the viewer may see (finance: every team) with the period's spend, the forecast and its
range, and the thresholds crossed. Views call selectors only."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from apps.accounts.selectors import visible_team_names
from apps.budgets.selectors import budget_statuses


@login_required
def budgets_page(request: HttpRequest) -> HttpResponse:
    team = (request.GET.get("team") or "").strip()[:100]
    rows = budget_statuses(now=timezone.now(), visible_teams=visible_team_names(request.user),
                           teams=[team] if team else ())
    return render(request, "budgets/index.html", {"rows": [r.as_dict() for r in rows], "team": team})
