"""`/api/v1/findings/`: parse parameters, call a selector, render. Nothing else."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.selectors import visible_team_names
from apps.common.api import FormatParamMixin, Pagination, paginated
from apps.common.params import param_error, parse_choice, parse_range, parse_text_list
from apps.common.serializers import DetailSerializer, ErrorSerializer
from apps.findings.api.serializers import FindingSerializer
from apps.findings.selectors import KINDS, finding_get, finding_list

FILTERS = ("kind", "cluster", "team", "namespace", "workload", "node")
ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="a parameter is malformed or out of range; it is named"),
    401: OpenApiResponse(DetailSerializer, description="no or invalid credentials"),
}


class FindingListApi(FormatParamMixin, APIView):
    """Everything the product flags, one shape: findings overlapping `[start, end)`, newest first."""

    pagination_class = Pagination

    @extend_schema(
        operation_id="findings_list",
        parameters=[
            OpenApiParameter("start", str, description="ISO 8601 time or date (UTC), on the hour; default: end - 7d"),
            OpenApiParameter("end", str, description="exclusive; default: the end of the current hour"),
            OpenApiParameter("kind", str, many=True, explode=True, enum=list(KINDS),
                             description="only these kinds (repeatable, or comma-separated)"),
            *[OpenApiParameter(key, str, many=True, explode=True, description=f"only these {key}s (repeatable)")
              for key in FILTERS if key != "kind"],
            OpenApiParameter("ongoing", str, enum=["true", "false"], description="only findings that go on (or not)"),
            OpenApiParameter("page", int),
            OpenApiParameter("page_size", int, description=f"at most {Pagination.max_page_size}"),
        ],
        responses={200: FindingSerializer(many=True), **ERRORS},
    )
    def get(self, request):
        params = request.query_params
        query = params.copy()
        if not (query.get("end") or "").strip():  # default: up to the end of the current (provisional) hour
            now = timezone.now().replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
            query["end"] = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        start, end = parse_range(query, default_days=7)
        filters = {key: parse_text_list(params, key) for key in FILTERS}
        for kind in filters["kind"]:
            if kind not in KINDS:
                raise param_error("kind", f"Unknown value {kind[:50]!r}; expected any of: {', '.join(KINDS)}.")
        ongoing = parse_choice(params, "ongoing", ["true", "false"])
        rows = finding_list(
            visible_teams=visible_team_names(request.user), start=start, end=end, kinds=filters["kind"],
            clusters=filters["cluster"], teams=filters["team"], namespaces=filters["namespace"],
            workloads=filters["workload"], nodes=filters["node"],
            ongoing=None if ongoing is None else ongoing == "true",
        )
        return paginated(self, request, rows, FindingSerializer)


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
