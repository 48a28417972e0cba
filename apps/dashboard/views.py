"""The dashboard pages (overview, capacity, queues) and /healthz. Views call selectors and pure chart functions;
they never call the REST API over HTTP. The app has no models."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.cache import never_cache

from apps.accounts.selectors import visible_team_names
from apps.capacity.selectors import fragmentation_at, fragmentation_range, pending_list
from apps.dashboard import charts
from apps.inventory.models import Cluster
from apps.queues.selectors import queue_list, queue_usage
from apps.reports import archive as report_archive
from apps.usage.activity import default_signal
from apps.usage.selectors import busy_share, clusters_missing_signal, data_status, idle_allocation_list, usage_report

BROKER_TIMEOUT_SECONDS = 2.0


PERIODS = {"1": 1, "7": 7, "30": 30}


def _period(request: HttpRequest) -> tuple[datetime, datetime, int]:
    """The last N days up to the end of the current (provisional) hour; N from ?days=1|7|30, default 7."""
    days = PERIODS.get(request.GET.get("days", "7"), 7)
    end = timezone.now().replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    return end - timedelta(days=days), end, days


def overview(request: HttpRequest) -> HttpResponse:
    """The landing page: the period's GPU-hours and cost for the teams the user sees, or how to start."""
    if not request.user.is_authenticated:
        return render(request, "dashboard/overview.html", {})  # nothing about the installation before sign-in
    # Clusters are infrastructure: staff see how they are reached (never a credential), nobody else does.
    clusters = list(Cluster.objects.all()) if request.user.is_staff else []
    context: dict = {"cluster_count": Cluster.objects.count(), "clusters": clusters, "periods": list(PERIODS)}
    if context["cluster_count"]:
        start, end, days = _period(request)
        teams = visible_team_names(request.user)
        by_day = usage_report(start=start, end=end, group_by=["day"], visible_teams=teams)
        by_team = usage_report(start=start, end=end, group_by=["team"], visible_teams=teams)
        # The same hours under the naive gauge: the gap is what dashboards built on GPU_UTIL overstate.
        naive = usage_report(start=start, end=end, group_by=[], signal="gpu_util", visible_teams=teams)
        idle = idle_allocation_list(visible_teams=teams)[:10]
        context.update(
            missing_signal=clusters_missing_signal(visible_teams=teams),
            start=start, end=end, days=days, totals=by_day.totals, coverage=by_day.coverage,
            capacity=by_day.capacity, provisional=by_day.provisional,
            busy_sm=busy_share(by_day.totals), busy_naive=busy_share(naive.totals),
            teams=sorted(by_team.results, key=lambda r: -r["allocated_gpu_hours"]), idle=idle,
            figures=charts.as_script_data({
                "chart-daily": charts.daily_activity(by_day.results),
                "chart-teams": charts.team_split(by_team.results),
            }),
        )
    return render(request, "dashboard/overview.html", context)


@login_required
def capacity(request: HttpRequest) -> HttpResponse:
    """Fragmentation per node group now, and free GPUs next to the largest free block over time."""
    teams = visible_team_names(request.user)
    now = timezone.now()
    start, end, days = _period(request)
    groups = [
        (g, [g.placeable.get(k, 0) for k in ("1", "2", "4", "8")], [g.stranded_gpus.get(k, 0) for k in ("2", "4", "8")])
        for g in fragmentation_at(at=now, visible_teams=teams)
    ]
    history = fragmentation_range(start=start, end=end, visible_teams=teams)
    pending = pending_list(at=now, visible_teams=teams)[:50]
    context = {
        "groups": groups, "pending": pending, "days": days, "periods": list(PERIODS),
        "figures": charts.as_script_data({"chart-free": charts.free_over_time(history)}),
    }
    return render(request, "dashboard/capacity.html", context)


@login_required
def queues(request: HttpRequest) -> HttpResponse:
    """Kueue quota per ClusterQueue next to the GPU-hours its pods allocated and worked."""
    teams = visible_team_names(request.user)
    start, end, days = _period(request)
    rows = queue_usage(start=start, end=end, signal=default_signal(), visible_teams=teams)
    # GPU resources only: CPU and memory quota are in the API (/api/v1/queues/), not this GPU page.
    quotas = [q for q in queue_list(at=timezone.now(), visible_teams=teams) if q.resource.startswith("nvidia.com/")]
    return render(request, "dashboard/queues.html",
                  {"rows": rows, "quotas": quotas, "days": days, "periods": list(PERIODS)})


@login_required
def data_status_page(request: HttpRequest) -> HttpResponse:
    """Per cluster and day of the last week: which hours are final, which failed or were kept, and why."""
    teams = visible_team_names(request.user)
    end = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    rows = data_status(start=end - timedelta(days=7), end=end, visible_teams=teams)
    rows.sort(key=lambda r: (r.cluster, -r.day.toordinal()))
    return render(request, "dashboard/data_status.html", {
        "rows": rows, "missing_signal": clusters_missing_signal(visible_teams=teams),
        "abandon_days": settings.GPUFINOPS_ABANDON_AFTER_DAYS,
    })


@login_required
def reports_page(request: HttpRequest) -> HttpResponse:
    """The report archive: every period's editions the user may see (finance and staff: all; team leads: their
    teams'), with status, totals, coverage, digests and the exact files; and the periods still due."""
    return render(request, "reports/index.html", report_archive.page(request.user, request.GET.get("period")))


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
    from celery import current_app as app  # the project's app, created by gpufinops/__init__.py

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
    """Status as JSON: 200 while the database answers, 503 when it does not; details (database and broker
    status with their errors) only for staff. Probes need no sign-in and learn nothing more than the word."""
    database = database_status()
    broker = broker_status()
    healthy = database == "ok" and not broker.startswith("error")
    body = {"status": "ok" if healthy else "degraded"}
    if request.user.is_authenticated and request.user.is_staff:
        # Addresses and error texts help an operator and an attacker alike: staff only.
        body.update(database=database, broker=broker)
    return JsonResponse(body, status=200 if database == "ok" else 503)
