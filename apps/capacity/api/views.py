"""Fragmentation and pending-work endpoints: parse parameters, call a selector, render."""

from __future__ import annotations

from datetime import UTC, datetime

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.selectors import history_days, visible_team_names
from apps.capacity.api.serializers import (
    FragmentationAtSerializer,
    FragmentationRangeSerializer,
    PendingCountsResponseSerializer,
    PendingSerializer,
)
from apps.capacity.constants import PendingReason
from apps.capacity.selectors import fragmentation_at, fragmentation_range, pending_counts, pending_list
from apps.common.api import (
    CLUSTER_PARAM,
    ERRORS,
    LIST_RENDERERS,
    PAGE_PARAMS,
    TEAM_PARAM,
    FormatParamMixin,
    Pagination,
    paginated,
)
from apps.common.params import param_error, parse_choice, parse_datetime, parse_range, parse_text
from apps.usage.directory import refuse_unknown_filters

AT_PARAM = OpenApiParameter("at", str, description="ISO 8601 time or date (UTC); default now")
START_PARAM = OpenApiParameter("start", str, description="ISO 8601 time or date (UTC), inclusive")
END_PARAM = OpenApiParameter("end", str, description="ISO 8601 time or date (UTC), exclusive")


def _now() -> datetime:
    return datetime.now(UTC)


class FragmentationApi(FormatParamMixin, APIView):
    """Per node group: free GPUs, the largest block one pod could get, what fits and what is stranded."""

    @extend_schema(
        operation_id="fragmentation",
        parameters=[CLUSTER_PARAM, AT_PARAM, START_PARAM, END_PARAM],
        responses={200: FragmentationAtSerializer, **ERRORS},
        description="With `at` (default now): the latest snapshot at or before it. With `start`/`end`: every "
        "snapshot in the range (response has `start`, `end` instead of `at`).",
    )
    def get(self, request):
        refuse_unknown_filters(request.query_params, visible_teams=visible_team_names(request.user))
        params = request.query_params
        teams, cluster = visible_team_names(request.user), parse_text(params, "cluster")
        if params.get("start") or params.get("end"):
            if params.get("at"):
                raise param_error("at", "Give either `at` or `start`/`end`, not both.")
            start, end = parse_range(
                params, default_days=1, whole_hours=False, now=_now(), max_days=history_days(request.user)
            )
            history = fragmentation_range(start=start, end=end, visible_teams=teams, cluster=cluster)
            return Response(FragmentationRangeSerializer({"start": start, "end": end, "results": history}).data)
        at = parse_datetime(params, "at", default=_now())
        rows = fragmentation_at(at=at, visible_teams=teams, cluster=cluster)
        return Response(FragmentationAtSerializer({"at": at, "results": rows}).data)


class PendingListApi(FormatParamMixin, APIView):
    """Pending pods and Kueue workloads that need GPUs, each with the reason it waits."""

    pagination_class = Pagination
    renderer_classes = LIST_RENDERERS

    @extend_schema(
        operation_id="pending",
        parameters=[
            CLUSTER_PARAM,
            TEAM_PARAM,
            AT_PARAM,
            OpenApiParameter("reason", str, enum=list(PendingReason.values)),
            *PAGE_PARAMS,
        ],
        responses={200: PendingSerializer(many=True), **ERRORS},
    )
    def get(self, request):
        refuse_unknown_filters(request.query_params, visible_teams=visible_team_names(request.user))
        params = request.query_params
        rows = pending_list(
            at=parse_datetime(params, "at", default=_now()),
            visible_teams=visible_team_names(request.user),
            cluster=parse_text(params, "cluster"),
            team=parse_text(params, "team"),
            reason=parse_choice(params, "reason", PendingReason.values),
        )
        return paginated(self, request, rows, PendingSerializer, name="pending")


class PendingCountsApi(FormatParamMixin, APIView):
    """Pending GPU work counted by reason at every collection in a range (default: the last day)."""

    @extend_schema(
        operation_id="pending_counts",
        parameters=[CLUSTER_PARAM, TEAM_PARAM, START_PARAM, END_PARAM],
        responses={200: PendingCountsResponseSerializer, **ERRORS},
    )
    def get(self, request):
        refuse_unknown_filters(request.query_params, visible_teams=visible_team_names(request.user))
        params = request.query_params
        now = _now()
        if not params.get("start") and not params.get("end"):
            params = {**params.dict(), "end": now.isoformat()}
        start, end = parse_range(
            params, default_days=1, whole_hours=False, now=now, max_days=history_days(request.user)
        )
        rows = pending_counts(
            start=start,
            end=end,
            visible_teams=visible_team_names(request.user),
            cluster=parse_text(params, "cluster"),
            team=parse_text(params, "team"),
        )
        return Response(PendingCountsResponseSerializer({"start": start, "end": end, "results": rows}).data)
