"""The base pages: overview (with the newcomer's empty state), placeholders for later dashboards, /healthz."""

from __future__ import annotations

from django.db import connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache

from apps.inventory.models import Cluster

BROKER_TIMEOUT_SECONDS = 2.0


def overview(request: HttpRequest) -> HttpResponse:
    """The landing page: clusters at a glance, or how to add the first one."""
    clusters = list(Cluster.objects.all()) if request.user.is_authenticated else []
    context = {"clusters": clusters, "cluster_count": Cluster.objects.count()}
    return render(request, "dashboard/overview.html", context)


def placeholder(request: HttpRequest, title: str) -> HttpResponse:
    """A page the navigation links to before its dashboard exists."""
    return render(request, "dashboard/placeholder.html", {"title": title})


def database_status() -> str:
    """"ok" when the default database answers `SELECT 1`, else "error: <reason>"."""
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any failure is the answer, not a crash
        return f"error: {exc.__class__.__name__}: {exc}".strip()
    return "ok"


def broker_status() -> str:
    """"not configured" in the embedded mode (tasks in-process), "ok" when the broker accepts a connection."""
    from gpufinops.celery import app

    if app.conf.task_always_eager or not app.conf.broker_url:
        return "not configured"
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=BROKER_TIMEOUT_SECONDS)
    except Exception as exc:  # unreachable broker, bad URL, auth
        return f"error: {exc.__class__.__name__}: {exc}".strip()
    return "ok"


@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """Database and broker status as JSON: 200 while the database answers, 503 when it does not."""
    database = database_status()
    broker = broker_status()
    healthy = database == "ok" and not broker.startswith("error")
    body = {"database": database, "broker": broker, "status": "ok" if healthy else "degraded"}
    return JsonResponse(body, status=200 if database == "ok" else 503)
