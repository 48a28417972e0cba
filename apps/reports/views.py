"""The unsubscribe link of the report e-mails: `/reports/unsubscribe/<token>/`.

GET shows what the link would stop, with a button; POST stops it (the subscription is deactivated, not deleted:
the record of what was sent stays). Mail providers that support RFC 8058 one-click unsubscribe POST
`List-Unsubscribe=One-Click` to the same URL without a session or CSRF token: the signed token is what
authorizes the request (nobody can make one for another subscription), so the view is CSRF-exempt.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from apps.reports.selectors import subscription_get
from apps.reports.subscriptions import deactivate
from apps.reports.tokens import read_token


@csrf_exempt
@never_cache
@require_http_methods(["GET", "POST"])
def unsubscribe(request: HttpRequest, token: str) -> HttpResponse:
    sub_id = read_token(token)
    sub = subscription_get(sub_id) if sub_id else None
    if sub is None:
        return render(request, "reports/unsubscribe.html", {"invalid": True}, status=404)
    if request.method == "POST":
        deactivate(sub)
        return render(request, "reports/unsubscribe.html", {"sub": sub, "done": True})
    return render(request, "reports/unsubscribe.html", {"sub": sub})
