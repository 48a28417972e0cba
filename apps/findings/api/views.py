"""`/api/v1/findings/` and `/api/v1/idle-allocations/` (a view over the idle findings): parse parameters, call a
selector, render. Nothing else."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.selectors import visible_team_names
from apps.common.api import (
    CLUSTER_PARAM,
    ERRORS,
    LIST_RENDERERS,
    PAGE_PARAMS,
    PERIOD_PARAMS,
    TEAM_PARAM,
    FormatParamMixin,
    Pagination,
    WindowPagination,
    paginated,
    request_window,
)
from apps.common.params import param_error, parse_choice, parse_text, parse_text_list
from apps.common.serializers import DetailSerializer
from apps.findings.api.serializers import FindingSerializer, IdleAllocationSerializer
from apps.findings.selectors import KINDS, finding_get, finding_list, idle_allocation_list
from apps.usage.activity import SIGNALS, default_signal
from apps.usage.directory import refuse_unknown_filters

FILTERS = ("kind", "cluster", "team", "namespace", "workload", "node")


class FindingListApi(FormatParamMixin, APIView):
    """Everything the product flags, one shape: findings overlapping the period (the pages' periods), newest
    first."""

    pagination_class = WindowPagination
    renderer_classes = LIST_RENDERERS

    @extend_schema(
        operation_id="findings_list",
        parameters=[
            *PERIOD_PARAMS,
            OpenApiParameter("kind", str, many=True, explode=True, enum=list(KINDS),
                             description="only these kinds (repeatable, or comma-separated)"),
            *[OpenApiParameter(key, str, many=True, explode=True, description=f"only these {key}s (repeatable)")
              for key in FILTERS if key != "kind"],
            OpenApiParameter("ongoing", str, enum=["true", "false"], description="only findings that go on (or not)"),
            *PAGE_PARAMS,
        ],
        responses={200: FindingSerializer(many=True), **ERRORS},
    )
    def get(self, request):
        refuse_unknown_filters(request.query_params, visible_teams=visible_team_names(request.user))
        params = request.query_params
        window = request_window(request)
        filters = {key: parse_text_list(params, key) for key in FILTERS}
        for kind in filters["kind"]:
            if kind not in KINDS:
                raise param_error("kind", f"Unknown value {kind[:50]!r}; expected any of: {', '.join(KINDS)}.")
        ongoing = parse_choice(params, "ongoing", ["true", "false"])
        rows = finding_list(
            visible_teams=visible_team_names(request.user), start=window.start, end=window.end, kinds=filters["kind"],
            clusters=filters["cluster"], teams=filters["team"], namespaces=filters["namespace"],
            workloads=filters["workload"], nodes=filters["node"],
            ongoing=None if ongoing is None else ongoing == "true",
        )
        return paginated(self, request, rows, FindingSerializer, window=window, name="findings")


class FindingDetailApi(FormatParamMixin, APIView):
    @extend_schema(
        operation_id="findings_retrieve",
        responses={
            200: FindingSerializer, 401: DetailSerializer,
            404: OpenApiResponse(DetailSerializer, description="no such finding, or one the caller may not see"),
        },
    )
    def get(self, request, pk: int):
        finding = finding_get(pk=pk, visible_teams=visible_team_names(request.user))
        if finding is None:
            raise NotFound()
        return Response(FindingSerializer(finding).data)


class IdleAllocationListApi(FormatParamMixin, APIView):
    """Pods holding GPUs that have done (almost) nothing for consecutive hours, as of the latest bucket: the
    idle-allocation findings (also in `/api/v1/findings/?kind=idle_allocation`), under the default signal."""

    pagination_class = Pagination
    renderer_classes = LIST_RENDERERS

    @extend_schema(
        operation_id="idle_allocations",
        parameters=[
            CLUSTER_PARAM,
            TEAM_PARAM,
            OpenApiParameter("signal", str, enum=list(SIGNALS),
                             description="activity signal; findings are computed under the default "
                             "(GPUFINOPS_DEFAULT_SIGNAL) only, another is a 400"),
            *PAGE_PARAMS,
        ],
        responses={200: IdleAllocationSerializer(many=True), **ERRORS},
    )
    def get(self, request):
        refuse_unknown_filters(request.query_params, visible_teams=visible_team_names(request.user))
        params = request.query_params
        try:
            rows = idle_allocation_list(
                visible_teams=visible_team_names(request.user),
                cluster=parse_text(params, "cluster"),
                team=parse_text(params, "team"),
                signal=parse_choice(params, "signal", SIGNALS, default=default_signal()),
            )
        except ValueError as exc:  # findings are computed under the default signal only
            raise param_error("signal", str(exc)) from exc
        return paginated(self, request, rows, IdleAllocationSerializer, name="idle-allocations")
