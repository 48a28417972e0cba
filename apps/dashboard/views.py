"""The dashboard pages and /healthz. Views read the query string into a `Scope` (period, filters, signal, the
caller's visibility), call a page composition (`apps.dashboard.selectors`, one module per page, which calls the same
selectors as the API) and render it; `?csv=<block>` answers any section's table as CSV. They never call the REST API
over HTTP. The app has no models."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import connections
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache

from apps.accounts.selectors import history_days, visible_team_names
from apps.capacity.selectors import fragmentation_at, fragmentation_range, pending_list
from apps.common.periods import page_window
from apps.dashboard import charts
from apps.dashboard.scope import FILTER_LABELS, SIGNAL_NAMES, Scope, parse_scope, period_choices
from apps.dashboard.selectors import shared
from apps.dashboard.selectors.fleet import fleet_page
from apps.dashboard.selectors.nodes import group_modes, nodes_block
from apps.dashboard.selectors.overview import overview_page
from apps.dashboard.selectors.queues import queues_page
from apps.dashboard.selectors.showback import showback_page
from apps.dashboard.selectors.workload import workload_page
from apps.dashboard.selectors.workloads import SORT_KEYS, workloads_page
from apps.dashboard.tables import Block
from apps.findings.selectors import FindingCounts, counts_for
from apps.inventory.selectors import visible_clusters
from apps.monitoring.selectors import last_preflight, last_preflights
from apps.reports import archive as report_archive
from apps.usage.activity import SIGNALS
from apps.usage.selectors import clusters_missing_signal, data_status

BROKER_TIMEOUT_SECONDS = 2
DATA_STATUS_MAX_DAYS = 93  # one row per cluster and day, as the API's data-status


def _finding_counts(scope: Scope) -> FindingCounts:
    """The findings block of the team and fleet overviews: counts and infra loss over the page's period, for what
    the viewer sees, narrowed to the team or cluster when exactly one is chosen."""
    teams, clusters = scope.filters.get("team", ()), scope.filters.get("cluster", ())
    return counts_for(visible_teams=scope.visible_teams, start=scope.window.start, end=scope.window.end,
                      team=teams[0] if len(teams) == 1 else None,
                      cluster=clusters[0] if len(clusters) == 1 else None, charges=True)


def _scope(request: HttpRequest, keep: tuple[str, ...] = ()) -> Scope:
    return parse_scope(request.GET, visible_team_names(request.user), keep=keep)


def _csv(request: HttpRequest, scope: Scope, page: str, blocks: list[Block]) -> HttpResponse | None:
    """`?csv=<block id>`: that section's table as CSV (exactly its rows and columns); None when not asked."""
    wanted = request.GET.get("csv")
    if not wanted:
        return None
    block = next((b for b in blocks if b.id == wanted), None)
    if block is None:
        raise Http404("no such table on this page")
    if "all_rows" in block.extra:  # a paged table: the CSV has every row of the filtered view
        block = Block(block.id, block.title, block.columns, block.extra["all_rows"], totals=block.totals)
    response = HttpResponse(block.csv(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{scope.window.filename(page, block.id)}"'
    return response


def _page(request: HttpRequest, template: str, scope: Scope, context: dict[str, Any], *, page: str,
          crumbs: list[tuple[str, str]], blocks: list[Block], options: bool = True) -> HttpResponse:
    """Renders a page with what every page has: breadcrumbs, the period and filter bar, the status badge, the
    messages about refused input, and each block's chart data."""
    response = _csv(request, scope, page, blocks)
    if response is not None:
        return response
    opts = shared.filter_options(scope) if options else {}
    warnings = shared.filter_warnings(scope, opts) if options else []
    figures = {f"chart-{b.id}": b.figure for b in blocks if b.figure is not None}
    context.update(
        scope=scope, window=scope.window, status=shared.status(scope), options=opts,
        errors=[*scope.errors, *warnings], periods=period_choices(scope), crumbs=crumbs, blocks=blocks,
        figures=charts.as_script_data(figures) if figures else None, page_name=page,
        filter_keys=FILTER_LABELS, signals=[(s, SIGNAL_NAMES[s]) for s in SIGNALS],
        window_params=list(scope.window.params),
        filter_params=[(k, v) for k, v in scope.params() if k not in ("period", "days", "start", "end")],
    )
    return render(request, template, context)


def _plain(scope: Scope, **overrides: object) -> str:
    """The scope's query string without the workloads table's own parameters."""
    return scope.query(sort=None, order=None, busy_below=None, page=None, **overrides)


def overview(request: HttpRequest) -> HttpResponse:
    """View 1, the landing page: what the teams in scope spent on GPUs, how much of it worked, and which workloads
    and pods wasted it; or how to start."""
    if not request.user.is_authenticated:
        return render(request, "dashboard/overview.html", {})  # nothing about the installation before sign-in
    # Clusters are infrastructure: staff see how they are reached (never a credential), nobody else does.
    every = visible_clusters(visible_teams=None)
    clusters = list(every) if request.user.is_staff else []
    cluster_count = len(clusters) if request.user.is_staff else every.count()
    if not cluster_count:
        return render(request, "dashboard/overview.html", {"cluster_count": 0})
    scope = _scope(request)
    if scope.visible_teams is not None and not scope.visible_teams:
        # On no team: say so and how to fix it, rather than $0.00 tiles and "nothing collected yet" (false).
        return render(request, "dashboard/overview.html", {"no_team": True, "cluster_count": cluster_count,
                                                            "crumbs": [("Overview", "")]})
    data = overview_page(scope)
    crumbs = [("Overview", "")]
    if scope.filters.get("team"):
        crumbs = [("Overview", reverse("dashboard:overview") + "?" + scope.query(team=None)),
                  (", ".join(scope.filters["team"]), "")]
    data.update(cluster_count=cluster_count, clusters=clusters, finding_counts=_finding_counts(scope))
    return _page(request, "dashboard/overview.html", scope, data, page="overview", crumbs=crumbs,
                 blocks=data["blocks"])


@login_required
def workloads(request: HttpRequest) -> HttpResponse:
    """View 2: every workload in scope, sortable by any column (default: idle cost, largest first), with a totals
    row and a CSV of all of its rows."""
    keep = ("sort", "order", "busy_below")
    scope = _scope(request, keep=keep)
    busy_below = None
    raw = (request.GET.get("busy_below") or "").strip()
    errors: list[str] = []
    if raw:
        try:
            busy_below = float(raw)
            if not 0 < busy_below <= 100:
                raise ValueError
        except ValueError:
            errors.append("busy_below must be a number of percent between 0 and 100; the filter was left out.")
            busy_below = None
    page_raw = request.GET.get("page") or "1"
    page = int(page_raw) if page_raw.isdigit() and len(page_raw) < 7 else 1
    sort = request.GET.get("sort") or "idle_cost"
    if sort not in SORT_KEYS:
        errors.append(f"Unknown sort column {sort[:40]!r}; sorted by idle cost.")
        sort = "idle_cost"
    data = workloads_page(scope, sort=sort, order=request.GET.get("order") or "desc", page=page,
                          busy_below=busy_below,
                          every_row=request.GET.get("format") == "csv" or bool(request.GET.get("csv")))
    if request.GET.get("format") == "csv":
        return _csv_all(scope, data["table_block"])
    if errors:
        scope = Scope(scope.window, scope.filters, scope.signal, scope.visible_teams, (*scope.errors, *errors),
                      scope.extra)
    crumbs = [("Overview", reverse("dashboard:overview") + "?" + _plain(scope)), ("Workloads", "")]
    return _page(request, "dashboard/workloads.html", scope, data, page="workloads", crumbs=crumbs,
                 blocks=[data["table_block"]])


def _csv_all(scope: Scope, block: Block) -> HttpResponse:
    full = Block(block.id, block.title, block.columns, block.extra["all_rows"], totals=block.totals)
    response = HttpResponse(full.csv(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{scope.window.filename("workloads")}"'
    return response


@login_required
def workload(request: HttpRequest, cluster: str, namespace: str, workload: str) -> HttpResponse:
    """View 3: one workload. 404 when the caller may see none of it (its existence is not leaked)."""
    scope = _scope(request)
    name = "" if workload == shared.NO_WORKLOAD else workload
    data = workload_page(scope, cluster, namespace, name)
    if data is None:
        raise Http404("no such workload, or none you may see")
    crumbs = [("Overview", reverse("dashboard:overview") + "?" + scope.query()),
              ("Workloads", reverse("dashboard:workloads") + "?" + scope.query()),
              (f"{cluster} / {namespace}", reverse("dashboard:workloads") + "?" + scope.query(
                  cluster=cluster, namespace=namespace)),
              (name or "(not recorded)", "")]
    return _page(request, "dashboard/workload.html", scope, data, page="workload", crumbs=crumbs,
                 blocks=data["blocks"])


@login_required
def queues(request: HttpRequest) -> HttpResponse:
    """View 4: the team's queues and quota, what waited and why, GPU-hours waited next to GPU-hours held idle."""
    scope = _scope(request)
    data = queues_page(scope)
    crumbs = [("Overview", reverse("dashboard:overview") + "?" + scope.query()), ("Queues and quota", "")]
    return _page(request, "dashboard/queues.html", scope, data, page="queues", crumbs=crumbs, blocks=data["blocks"])


@login_required
def fleet(request: HttpRequest) -> HttpResponse:
    """View 6 (finance and platform admins): capacity -> allocated -> working, and both kinds of idle."""
    scope = _scope(request)
    crumbs = [("Fleet", "")]
    if not scope.sees_all:
        response = _page(request, "dashboard/fleet.html", scope, {"forbidden": True}, page="fleet", crumbs=crumbs,
                         blocks=[], options=False)
        response.status_code = 403
        return response
    data = fleet_page(scope)
    data["finding_counts"] = _finding_counts(scope)
    return _page(request, "dashboard/fleet.html", scope, data, page="fleet", crumbs=crumbs, blocks=data["blocks"])


@login_required
def teams(request: HttpRequest) -> HttpResponse:
    """View 7: showback, one row per team (and unallocated capacity for those who see every team)."""
    scope = _scope(request)
    data = showback_page(scope)
    first = ("Fleet", reverse("dashboard:fleet") + "?" + scope.query()) if scope.sees_all else (
        "Overview", reverse("dashboard:overview") + "?" + scope.query())
    return _page(request, "dashboard/teams.html", scope, data, page="teams", crumbs=[first, ("Teams", "")],
                 blocks=[data["table_block"]])


def glossary(request: HttpRequest) -> HttpResponse:
    """What every figure means, in a few lines each (the full rules: docs/numbers.md)."""
    return render(request, "dashboard/glossary.html", {"crumbs": [("Overview", reverse("dashboard:overview")),
                                                                  ("Glossary", "")]})


@login_required
def capacity(request: HttpRequest) -> HttpResponse:
    """View 8 (the existing page): fragmentation per node group now, free GPUs next to the largest free block over
    the period (at most the caller's history limit), pending GPU work with its reason."""
    scope = _scope(request)
    teams_ = scope.visible_teams
    now = timezone.now()
    w = scope.window
    start = w.last(history_days(request.user)).start
    notes = []
    if start > w.start:
        notes.append(f"The chart covers the last {history_days(request.user)} days of the period (history limit).")
    clusters = set(scope.filters.get("cluster", ()))
    frag = [g for g in fragmentation_at(at=min(now, w.end), visible_teams=teams_) if not clusters or
            g.cluster.name in clusters]
    nodes = nodes_block(scope)
    modes = group_modes(nodes)
    groups = [(g, [g.placeable.get(k, 0) for k in ("1", "2", "4", "8")], [g.stranded_gpus.get(k, 0) for k in
                                                                           ("2", "4", "8")],
               modes.get(f"{g.cluster.name} / {g.node_group}", "")) for g in frag]
    history = [r for r in fragmentation_range(start=start, end=w.end, visible_teams=teams_)
               if not clusters or r.cluster.name in clusters]
    pending = [p for p in pending_list(at=min(now, w.end), visible_teams=shared.teams_in_scope(scope))
               if not clusters or p.cluster.name in clusters][:50]
    block = Block("free", "Free GPUs and the largest free block over time", [], [],
                  figure=charts.free_over_time(history, "free") if history else None)
    crumbs = [("Fleet", reverse("dashboard:fleet") + "?" + scope.query()) if scope.sees_all else
              ("Overview", reverse("dashboard:overview") + "?" + scope.query()), ("Capacity", "")]
    context = {"groups": groups, "pending": pending, "history_count": len(history), "notes": notes, "nodes": nodes}
    return _page(request, "dashboard/capacity.html", scope, context, page="capacity", crumbs=crumbs,
                 blocks=[block, nodes])


@login_required
def data_status_page(request: HttpRequest) -> HttpResponse:
    """Per cluster and day of the page's period (default the last 7 days): which hours are final, which failed or
    were kept, and why."""
    teams_ = visible_team_names(request.user)
    window, errors = page_window(request.GET, timezone.now(), max_days=DATA_STATUS_MAX_DAYS)
    rows = data_status(start=window.start, end=window.end, visible_teams=teams_)
    rows.sort(key=lambda r: (r.cluster, -r.day.toordinal()))
    return render(request, "dashboard/data_status.html", {
        "rows": rows, "missing_signal": clusters_missing_signal(visible_teams=teams_), "window": window,
        "errors": errors,
        "abandon_days": settings.GPUFINOPS_ABANDON_AFTER_DAYS,
        "preflights": sorted(last_preflights().values(), key=lambda r: r.cluster.name) if request.user.is_staff
        else [],
        "crumbs": [("Overview", reverse("dashboard:overview")), ("Data status", "")],
    })


@login_required
def cluster_preflight(request: HttpRequest, cluster: str) -> HttpResponse:
    """Staff only: the cluster's last preflight (`check_cluster`): each check, what was found, status, fix."""
    run = last_preflight(cluster) if request.user.is_staff else None
    if run is None:
        raise Http404("no preflight of that cluster")
    return render(request, "dashboard/preflight.html", {
        "run": run, "failed": sum(1 for c in run.checks if c.get("status") == "fail"),
        "warned": sum(1 for c in run.checks if c.get("status") == "warn"),
        "crumbs": [("Overview", reverse("dashboard:overview")), ("Data status", reverse("dashboard:data-status")),
                   (f"Preflight of {cluster}", "")],
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
