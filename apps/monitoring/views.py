"""`/metrics` (Prometheus text, protected: see access.py) and `/livez` (the process answers; no database)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from apps.monitoring.access import may_scrape
from apps.monitoring.metrics import LedgerCollector


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not may_scrape(request):
        response = HttpResponse("metrics: not allowed from here without the token\n", status=403,
                                content_type="text/plain; charset=utf-8")
        return response
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LedgerCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


@never_cache
@require_GET
def livez(request: HttpRequest) -> HttpResponse:
    """Liveness: this process serves requests. Deliberately checks nothing else, so a database outage makes
    pods unready (`/healthz`), never restarts them."""
    return HttpResponse("ok\n", content_type="text/plain; charset=utf-8")
