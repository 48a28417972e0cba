"""The bill's endpoints (docs/billing.md). Parse parameters, call the selector, render.

* `GET /api/v1/reconciliation/?month=2026-11&cluster=…`: the price card against the bill, per cluster and node, for
  finance and staff (403 for anyone else: it is the whole fleet's cost);
* `GET /api/v1/billed-costs/?period=2026-W48` (or `days=`, `start=&end=`: the one period rule): each team's cost
  in the billed basis, for the teams the caller sees (the unallocated share for finance and staff only).
"""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.selectors import sees_all_teams, visible_team_names
from apps.billing.api.serializers import BilledCostsSerializer, ReconciliationSerializer
from apps.billing.selectors import billed_costs, latest_billed_month, parse_month, reconciliation
from apps.common.api import ERRORS, PERIOD_PARAMS, FormatParamMixin, request_window
from apps.common.params import param_error, parse_text, parse_text_list
from apps.common.serializers import DetailSerializer


class ReconciliationApi(FormatParamMixin, APIView):
    @extend_schema(
        operation_id="reconciliation_retrieve",
        parameters=[
            OpenApiParameter("month", str, description="YYYY-MM (UTC); default: the latest month the bill has"),
            OpenApiParameter("cluster", str, many=True, explode=True, description="only these clusters (repeatable)"),
        ],
        responses={200: ReconciliationSerializer, **ERRORS,
                   403: OpenApiResponse(DetailSerializer, description="finance and staff only")},
    )
    def get(self, request):
        if not sees_all_teams(request.user):
            raise PermissionDenied("The reconciliation is the whole fleet's cost: finance and staff only.")
        month = parse_text(request.query_params, "month") or latest_billed_month() or f"{timezone.now():%Y-%m}"
        if parse_month(month) is None:
            raise param_error("month", f"{month[:20]!r} is not a month; expected YYYY-MM.")
        clusters = parse_text_list(request.query_params, "cluster")
        result = reconciliation(month, clusters=clusters)
        return Response(ReconciliationSerializer(result.as_dict()).data)


class BilledCostsApi(FormatParamMixin, APIView):
    @extend_schema(
        operation_id="billed_costs_retrieve",
        parameters=[*PERIOD_PARAMS],
        responses={200: BilledCostsSerializer, **ERRORS},
    )
    def get(self, request):
        window = request_window(request)  # the one period rule: period=, days=, start=&end=
        result = billed_costs(start=window.start, end=window.end, visible_teams=visible_team_names(request.user))
        return Response(BilledCostsSerializer(result.as_dict()).data)
