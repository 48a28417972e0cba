"""Kueue quota endpoints: parse parameters, call a selector, render."""

from __future__ import annotations

from datetime import UTC, datetime

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.selectors import visible_team_names
from apps.common.api import CLUSTER_PARAM, ERRORS, PERIOD_PARAMS, FormatParamMixin, request_window
from apps.common.params import parse_choice, parse_datetime, parse_text
from apps.queues.api.serializers import (
    AdmissionWaitResponseSerializer,
    QueueListResponseSerializer,
    QueueUsageResponseSerializer,
)
from apps.queues.selectors import admission_waits, queue_list, queue_usage
from apps.usage.activity import SIGNALS, default_signal
from apps.usage.directory import refuse_unknown_filters


class QueueListApi(FormatParamMixin, APIView):
    """Kueue quota per ClusterQueue, flavor and resource at a time (default now)."""

    @extend_schema(
        operation_id="queues",
        parameters=[CLUSTER_PARAM, OpenApiParameter("at", str, description="ISO 8601 time or date; default now")],
        responses={200: QueueListResponseSerializer, **ERRORS},
    )
    def get(self, request):
        refuse_unknown_filters(request.query_params, visible_teams=visible_team_names(request.user))
        params = request.query_params
        at = parse_datetime(params, "at", default=datetime.now(UTC))
        rows = queue_list(at=at, visible_teams=visible_team_names(request.user), cluster=parse_text(params, "cluster"))
        return Response(QueueListResponseSerializer({"at": at, "results": rows}).data)


class AdmissionWaitApi(FormatParamMixin, APIView):
    """Creation-to-admission wait p50/p95 per ClusterQueue and day."""

    @extend_schema(
        operation_id="queues_admission_wait",
        parameters=[CLUSTER_PARAM, *PERIOD_PARAMS],
        responses={200: AdmissionWaitResponseSerializer, **ERRORS},
    )
    def get(self, request):
        refuse_unknown_filters(request.query_params, visible_teams=visible_team_names(request.user))
        params = request.query_params
        window = request_window(request)
        start, end = window.start, window.end
        rows = admission_waits(
            start=start, end=end, visible_teams=visible_team_names(request.user), cluster=parse_text(params, "cluster")
        )
        return Response(AdmissionWaitResponseSerializer({"start": start, "end": end, "results": rows}).data)


class QueueUsageApi(FormatParamMixin, APIView):
    """GPU quota per ClusterQueue next to the GPU-hours its pods allocated and worked."""

    @extend_schema(
        operation_id="queues_usage",
        parameters=[
            CLUSTER_PARAM,
            *PERIOD_PARAMS,
            OpenApiParameter("signal", str, enum=list(SIGNALS), description="default: GPUFINOPS_DEFAULT_SIGNAL"),
        ],
        responses={200: QueueUsageResponseSerializer, **ERRORS},
    )
    def get(self, request):
        refuse_unknown_filters(request.query_params, visible_teams=visible_team_names(request.user))
        params = request.query_params
        window = request_window(request)
        start, end = window.start, window.end
        signal = parse_choice(params, "signal", SIGNALS, default=default_signal())
        rows = queue_usage(
            start=start,
            end=end,
            signal=signal,
            visible_teams=visible_team_names(request.user),
            cluster=parse_text(params, "cluster"),
        )
        return Response(
            QueueUsageResponseSerializer({"start": start, "end": end, "signal": signal, "results": rows}).data
        )
