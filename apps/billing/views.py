"""`/reconciliation/`: the price card against the cloud bill, per cluster, node and month, for finance and staff.
Views call selectors only."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from apps.accounts.selectors import sees_all_teams
from apps.billing.selectors import latest_billed_month, parse_month, reconciliation


@login_required
def reconciliation_page(request: HttpRequest) -> HttpResponse:
    if not sees_all_teams(request.user):
        raise PermissionDenied("The reconciliation is the whole fleet's cost: finance and staff only.")
    errors: list[str] = []
    default = latest_billed_month() or f"{timezone.now():%Y-%m}"
    month = (request.GET.get("month") or "").strip() or default
    if parse_month(month) is None:
        errors.append(f"{month[:20]!r} is not a month (YYYY-MM): showing {default}.")
        month = default
    result = reconciliation(month)
    return render(request, "billing/reconciliation.html", {"r": result, "errors": errors, "month": month})
