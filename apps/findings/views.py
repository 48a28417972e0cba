"""The findings page (`/findings/`) and the opt-out link of the findings e-mails. Views call selectors only."""

from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from apps.accounts.selectors import visible_team_names
from apps.common.csvfile import csv_bytes
from apps.common.periods import page_window, quick_windows
from apps.inventory.selectors import team_named, visible_clusters, visible_team_rows

from .grouping import GROUP_BY, Group, group_by, whole_run
from .notifications import opt_out, read_opt_out_token
from .selectors import KINDS, counts_for, finding_list

MAX_ROWS = 500


def _text(value: str | None) -> str | None:
    value = (value or "").strip()
    return value[:253] if value and value.isprintable() else None


@login_required
def findings_page(request: HttpRequest) -> HttpResponse:
    """Findings the user may see over the page's period (the one period rule: the same bounds as the overviews and
    the API), filtered by kind, cluster, team and node; their counts and the infra loss next to each team's
    charge."""
    teams = visible_team_names(request.user)
    get = request.GET
    now = timezone.now()
    window, errors = page_window(get, now, max_days=settings.GPUFINOPS_API_MAX_RANGE_DAYS,
                                 max_hourly_days=settings.GPUFINOPS_API_MAX_HOURLY_DAYS)
    kind = get.get("kind") or None
    if kind is not None and kind not in KINDS:
        errors.append(f"Unknown kind {kind[:40]!r}: showing every kind.")
        kind = None
    by = get.get("group") or GROUP_BY[0]
    if by not in GROUP_BY:
        errors.append(f"Unknown grouping {by[:40]!r}: grouped by {GROUP_BY[0]}.")
        by = GROUP_BY[0]
    cluster, team, node = _text(get.get("cluster")), _text(get.get("team")), _text(get.get("node"))
    namespace, workload = _text(get.get("namespace")), _text(get.get("workload"))
    ongoing = {"1": True, "0": False}.get(get.get("ongoing", ""))
    start, end = window.start, window.end
    rows = list(finding_list(visible_teams=teams, start=start, end=end, kinds=[kind] if kind else (),
                             clusters=[cluster] if cluster else (), teams=[team] if team else (),
                             nodes=[node] if node else (), namespaces=[namespace] if namespace else (),
                             workloads=[workload] if workload else (), ongoing=ongoing)[: MAX_ROWS + 1])
    groups = group_by((whole_run(f) for f in rows[:MAX_ROWS]), by)
    if get.get("format") == "csv":
        response = HttpResponse(groups_csv(groups, by), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{window.filename("findings", "by-" + by)}"'
        return response
    counts = counts_for(visible_teams=teams, start=start, end=end, team=team, cluster=cluster, charges=True)
    team_names = visible_team_rows(visible_teams=teams).values_list("name", flat=True)
    filters = [(k, v) for k, v in (("kind", kind), ("cluster", cluster), ("team", team), ("node", node),
                                   ("namespace", namespace), ("workload", workload),
                                   ("ongoing", get.get("ongoing", "")), ("group", by)) if v]
    periods = [(label, urlencode([*w.params, *filters]), w.params == window.params)
               for label, w in quick_windows(now)]
    return render(request, "findings/index.html", {
        "rows": rows[:MAX_ROWS], "truncated": len(rows) > MAX_ROWS, "groups": groups, "group_by": by,
        "group_choices": GROUP_BY, "namespace": namespace, "workload": workload,
        "query": urlencode([*window.params, *filters]),
        "filter_params": filters, "filtered": any(k != "group" for k, _v in filters),
        "ungrouped_query": urlencode([*window.params, *[(k, v) for k, v in filters if k != "group"]]),
        "api_query": urlencode([*window.params, *[(k, v) for k, v in filters if k not in ("group", "ongoing")],
                                *([("ongoing", "true" if ongoing else "false")] if ongoing is not None else [])]),
        "counts": counts, "finding_counts": counts,
        "kinds": KINDS, "kind": kind, "cluster": cluster, "team": team, "node": node, "window": window,
        "window_params": list(window.params), "window_query": urlencode(window.params), "periods": periods,
        "all_nodes_query": urlencode([*window.params, *[(k, v) for k, v in filters if k != "node"]]),
        "all_workloads_query": urlencode([*window.params, *[(k, v) for k, v in filters
                                                            if k not in ("namespace", "workload")]]),
        "ongoing": get.get("ongoing", ""), "errors": errors, "start": start, "end": end,
        "clusters": list(visible_clusters(visible_teams=teams).values_list("name", flat=True)),
        "teams": list(team_names), "sees_all": teams is None,
    })


GROUP_HEADER = ["Group", "Findings", "Kinds", "Going on", "Since (UTC)", "Hours flagged", "GPU-hours", "Cost (USD)",
                "Infra loss (USD)", "Teams"]


def groups_csv(groups: list[Group], by: str) -> bytes:
    """`/findings/?format=csv`: one row per group as the page shows them (run figures, exact), the flat list of
    every finding being the API's `/api/v1/findings/?format=csv`."""
    return csv_bytes([f"{by.capitalize()} ({GROUP_HEADER[0].lower()})", *GROUP_HEADER[1:]], [
        [g.label, g.count, "; ".join(f"{k} x{n}" for k, n in g.kinds), g.ongoing,
         g.since.strftime("%Y-%m-%dT%H:%M:%SZ"), g.hours, round(float(g.gpu_hours), 6), g.cost, g.infra_loss,
         "; ".join(t or "platform" for t in g.teams)] for g in groups])


@csrf_exempt  # the one-click unsubscribe POST (RFC 8058) comes from a mail client, with the signed token only
def opt_out_view(request: HttpRequest, token: str) -> HttpResponse:
    """GET: what the link does; POST: stop the findings e-mails (for the team named in the link, or every team)."""
    data = read_opt_out_token(token)
    if data is None:
        raise Http404("invalid link")
    user = get_user_model().objects.filter(pk=data[0]).first()
    if user is None:
        raise Http404("invalid link")
    team = team_named(data[1]) if data[1] else None
    done = False
    if request.method == "POST":
        opt_out(user, team)
        done = True
    return render(request, "findings/opt_out.html", {"team": team, "done": done, "person": user.get_username()})
