"""Usage, team, cluster and data-status endpoints: parse parameters, call a selector, render. Nothing else."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.renderers import BrowsableAPIRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.selectors import visible_team_names
from apps.common.api import (
    CLUSTER_PARAM,
    ERRORS,
    LIST_RENDERERS,
    PAGE_PARAMS,
    PERIOD_PARAMS,
    DecimalJSONRenderer,
    FormatParamMixin,
    Pagination,
    WindowPagination,
    paginated,
    request_window,
)
from apps.common.params import param_error, parse_choice, parse_int, parse_list, parse_text, parse_text_list
from apps.common.serializers import DetailSerializer, ErrorSerializer
from apps.usage.activity import SIGNALS, default_signal
from apps.usage.api.renderers import UsageCSVRenderer
from apps.usage.api.serializers import (
    ClusterDetailSerializer,
    ClusterSerializer,
    DayStatusSerializer,
    RankingResponseSerializer,
    TeamDetailSerializer,
    TeamSerializer,
    UsageResponseSerializer,
)
from apps.usage.directory import cluster_get, cluster_list, refuse_unknown_filters, team_get, team_list
from apps.usage.selectors import (
    FILTER_KEYS,
    GROUP_KEYS,
    LEVELS,
    TooLarge,
    data_status,
    parse_ordering,
    rank,
    sort_keys,
    usage_report,
)

DATA_STATUS_MAX_DAYS = 93  # one row per cluster and day: a quarter at most
RANKING_MAX_LIMIT = 1000
FILTER_PARAMS = [
    OpenApiParameter(key, str, many=True, explode=True,
                     description=f"only these {key.replace('_', ' ')}s (repeatable, or comma-separated)")
    for key in FILTER_KEYS
]
SIGNAL_PARAM = OpenApiParameter(
    "signal", str, enum=list(SIGNALS), description="activity signal (default: GPUFINOPS_DEFAULT_SIGNAL)"
)


class UsageApi(FormatParamMixin, APIView):
    """GPU-hours and cost per group over a half-open range, from the ledger's rollups."""

    renderer_classes = [DecimalJSONRenderer, BrowsableAPIRenderer, UsageCSVRenderer]

    @extend_schema(
        operation_id="usage",
        parameters=[
            *PERIOD_PARAMS,
            OpenApiParameter(
                "group_by",
                str,
                description=f"comma-separated, any combination of: {', '.join(GROUP_KEYS)} (default team); "
                "workload comes with namespace, pod with namespace, workload and node",
            ),
            SIGNAL_PARAM,
            *FILTER_PARAMS,
            OpenApiParameter("format", str, enum=["json", "csv"], description="csv: the result rows as CSV"),
        ],
        responses={
            (200, "application/json"): UsageResponseSerializer,
            (200, "text/csv"): OpenApiTypes.STR,
            **ERRORS,
        },
    )
    def get(self, request):
        refuse_unknown_filters(request.query_params, visible_teams=visible_team_names(request.user))
        params = request.query_params
        window = request_window(request)
        start, end = window.start, window.end
        try:
            report = usage_report(
                start=start,
                end=end,
                group_by=parse_list(params, "group_by", GROUP_KEYS, default=["team"]),
                signal=parse_choice(params, "signal", SIGNALS, default=default_signal()),
                filters={key: parse_text_list(params, key) for key in FILTER_KEYS},
                visible_teams=visible_team_names(request.user),
            )
        except TooLarge as exc:  # bounded work per request: say how to narrow it
            raise param_error(exc.param, str(exc)) from exc
        response = Response(report.as_dict())
        if request.accepted_renderer.format == "csv":
            response["Content-Disposition"] = f'attachment; filename="{window.filename("usage")}"'
        return response


class RankingApi(FormatParamMixin, APIView):
    """Workloads, namespaces or pods ranked by any figure over a period, a page at a time, from the database."""

    renderer_classes = [DecimalJSONRenderer, BrowsableAPIRenderer]

    @extend_schema(
        operation_id="rankings",
        parameters=[
            *PERIOD_PARAMS,
            OpenApiParameter("by", str, enum=list(LEVELS), description="what is ranked (default workload)"),
            OpenApiParameter(
                "ordering", str,
                description="the sort key, a leading '-' for largest first (default -idle_cost): "
                            f"{', '.join(sort_keys('pod'))}; ties go by team, cluster, namespace, workload, pod",
            ),
            OpenApiParameter("limit", int, description=f"rows in the page (default 50, at most {RANKING_MAX_LIMIT})"),
            OpenApiParameter("offset", int, description="rows skipped before the page (default 0)"),
            SIGNAL_PARAM,
            *FILTER_PARAMS,
        ],
        responses={200: RankingResponseSerializer, **ERRORS},
    )
    def get(self, request):
        visible = visible_team_names(request.user)
        refuse_unknown_filters(request.query_params, visible_teams=visible)
        params = request.query_params
        window = request_window(request)
        level = parse_choice(params, "by", LEVELS, default="workload")
        try:
            ordering = parse_ordering(params.get("ordering"), level)
        except ValueError as exc:
            raise param_error("ordering", str(exc)) from exc
        limit = parse_int(params, "limit", default=50, min_value=1, max_value=RANKING_MAX_LIMIT) or 50
        offset = parse_int(params, "offset", default=0, min_value=0) or 0
        try:
            ranking = rank(level=level, start=window.start, end=window.end, visible_teams=visible, ordering=ordering,
                           filters={key: parse_text_list(params, key) for key in FILTER_KEYS},
                           signal=parse_choice(params, "signal", SIGNALS, default=default_signal()),
                           limit=limit, offset=offset)
        except TooLarge as exc:
            raise param_error(exc.param, str(exc)) from exc

        def page_url(at: int) -> str:
            query = params.copy()
            query["offset"] = str(at)
            query["limit"] = str(limit)
            return request.build_absolute_uri(request.path + "?" + query.urlencode())

        return Response({
            "start": window.start, "end": window.end, "by": level, "ordering": ordering.text,
            "signal": ranking.signal, "currency": "USD", "count": ranking.count, "limit": limit, "offset": offset,
            "next": page_url(offset + limit) if offset + limit < ranking.count else None,
            "previous": page_url(max(0, offset - limit)) if offset > 0 else None,
            "results": [row.as_dict() for row in ranking.rows],
            "totals": ranking.totals.as_dict(),
        })


# ---- Teams and clusters the caller may see (absent from lists, 404 on detail when invisible) ----

LIST_ERRORS = {400: ErrorSerializer, 401: DetailSerializer}
DETAIL_ERRORS = {
    401: DetailSerializer,
    404: OpenApiResponse(DetailSerializer, description="no such object, or one the caller may not see"),
}


class TeamListApi(FormatParamMixin, APIView):
    pagination_class = Pagination
    renderer_classes = LIST_RENDERERS

    @extend_schema(
        operation_id="teams_list", parameters=PAGE_PARAMS, responses={200: TeamSerializer(many=True), **LIST_ERRORS}
    )
    def get(self, request):
        return paginated(self, request, team_list(visible_teams=visible_team_names(request.user)), TeamSerializer,
                         name="teams")


class TeamDetailApi(FormatParamMixin, APIView):
    @extend_schema(operation_id="teams_retrieve", responses={200: TeamDetailSerializer, **DETAIL_ERRORS})
    def get(self, request, name: str):
        team = team_get(name=name, visible_teams=visible_team_names(request.user))
        if team is None:
            raise NotFound()
        return Response(TeamDetailSerializer(team).data)


class ClusterListApi(FormatParamMixin, APIView):
    pagination_class = Pagination
    renderer_classes = LIST_RENDERERS

    @extend_schema(
        operation_id="clusters_list",
        parameters=PAGE_PARAMS,
        responses={200: ClusterSerializer(many=True), **LIST_ERRORS},
    )
    def get(self, request):
        clusters = cluster_list(visible_teams=visible_team_names(request.user))
        return paginated(self, request, clusters, ClusterSerializer, name="clusters")


class ClusterDetailApi(FormatParamMixin, APIView):
    @extend_schema(operation_id="clusters_retrieve", responses={200: ClusterDetailSerializer, **DETAIL_ERRORS})
    def get(self, request, name: str):
        cluster = cluster_get(name=name, visible_teams=visible_team_names(request.user))
        if cluster is None:
            raise NotFound()
        return Response(ClusterDetailSerializer(cluster).data)


class DataStatusApi(FormatParamMixin, APIView):
    """Per cluster and UTC day: buckets ok, provisional, failed, degraded, abandoned or missing, coverage, why."""

    pagination_class = WindowPagination
    renderer_classes = LIST_RENDERERS

    @extend_schema(
        operation_id="data_status",
        parameters=[
            *PERIOD_PARAMS,
            CLUSTER_PARAM,
            *PAGE_PARAMS,
        ],
        responses={200: DayStatusSerializer(many=True), **ERRORS},
    )
    def get(self, request):
        refuse_unknown_filters(request.query_params, visible_teams=visible_team_names(request.user))
        params = request.query_params
        window = request_window(request, max_days=DATA_STATUS_MAX_DAYS)
        rows = data_status(start=window.start, end=window.end, cluster=parse_text(params, "cluster"),
                           visible_teams=visible_team_names(request.user))
        return paginated(self, request, rows, DayStatusSerializer, window=window, name="data-status")
