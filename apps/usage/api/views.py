"""Usage and idle-allocation endpoints: parse parameters, call a selector, render. Nothing else."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.selectors import visible_team_names
from apps.common.api import FormatParamMixin, Pagination
from apps.common.params import parse_choice, parse_list, parse_range, parse_text
from apps.common.serializers import DetailSerializer, ErrorSerializer
from apps.usage.api.renderers import UsageCSVRenderer
from apps.usage.api.serializers import IdleAllocationSerializer, UsageResponseSerializer
from apps.usage.selectors import GROUP_KEYS, idle_allocation_list, usage_report
from apps.usage.signals import DEFAULT_SIGNAL, SIGNALS

CLUSTER_PARAM = OpenApiParameter("cluster", str, description="only this cluster (by name)")
TEAM_PARAM = OpenApiParameter("team", str, description="only this team (by name)")
SIGNAL_PARAM = OpenApiParameter(
    "signal", str, enum=list(SIGNALS), description=f"activity signal (default {DEFAULT_SIGNAL})"
)
ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="a parameter is malformed or out of range; it is named"),
    401: OpenApiResponse(DetailSerializer, description="no or invalid credentials"),
}


class UsageApi(FormatParamMixin, APIView):
    """GPU-hours and cost per group over a half-open range, from the ledger's rollups."""

    renderer_classes = [JSONRenderer, BrowsableAPIRenderer, UsageCSVRenderer]

    @extend_schema(
        operation_id="usage",
        parameters=[
            OpenApiParameter(
                "start", str, description="ISO 8601 time or date (UTC), on the hour; default: end - 7 days"
            ),
            OpenApiParameter(
                "end", str, description="ISO 8601 time or date (UTC), on the hour, exclusive; default: today 00:00 UTC"
            ),
            OpenApiParameter(
                "group_by",
                str,
                description=f"comma-separated, any combination of: {', '.join(GROUP_KEYS)} (default team)",
            ),
            SIGNAL_PARAM,
            CLUSTER_PARAM,
            TEAM_PARAM,
            OpenApiParameter("format", str, enum=["json", "csv"], description="csv: the result rows as CSV"),
        ],
        responses={
            (200, "application/json"): UsageResponseSerializer,
            (200, "text/csv"): OpenApiTypes.STR,
            **ERRORS,
        },
    )
    def get(self, request):  # type: ignore[no-untyped-def]
        params = request.query_params
        start, end = parse_range(params)
        report = usage_report(
            start=start,
            end=end,
            group_by=parse_list(params, "group_by", GROUP_KEYS, default=["team"]),
            signal=parse_choice(params, "signal", SIGNALS, default=DEFAULT_SIGNAL),
            cluster=parse_text(params, "cluster"),
            team=parse_text(params, "team"),
            visible_teams=visible_team_names(request.user),
        )
        response = Response(report.as_dict())
        if request.accepted_renderer.format == "csv":
            response["Content-Disposition"] = f'attachment; filename="usage_{start:%Y%m%dT%H}_{end:%Y%m%dT%H}.csv"'
        return response


class IdleAllocationListApi(FormatParamMixin, APIView):
    """Pods holding GPUs that have done (almost) nothing for consecutive hours, as of the latest bucket."""

    pagination_class = Pagination

    @extend_schema(
        operation_id="idle_allocations",
        parameters=[
            CLUSTER_PARAM,
            TEAM_PARAM,
            SIGNAL_PARAM,
            OpenApiParameter("page", int),
            OpenApiParameter("page_size", int, description=f"at most {Pagination.max_page_size}"),
        ],
        responses={200: IdleAllocationSerializer(many=True), **ERRORS},
    )
    def get(self, request):  # type: ignore[no-untyped-def]
        params = request.query_params
        rows = idle_allocation_list(
            visible_teams=visible_team_names(request.user),
            cluster=parse_text(params, "cluster"),
            team=parse_text(params, "team"),
            signal=parse_choice(params, "signal", SIGNALS, default=DEFAULT_SIGNAL),
        )
        paginator = Pagination()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(IdleAllocationSerializer(page, many=True).data)
