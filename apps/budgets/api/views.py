"""`GET /api/v1/budgets/?team=`: every budget the caller may see (its teams; finance and staff every team) with the
current period's spend, forecast and thresholds crossed. Parse parameters, call the selector, render."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.selectors import visible_team_names
from apps.budgets.api.serializers import BudgetStatusSerializer
from apps.budgets.selectors import budget_statuses
from apps.common.api import ERRORS, FormatParamMixin
from apps.common.params import parse_text_list


class BudgetListApi(FormatParamMixin, APIView):
    @extend_schema(
        operation_id="budgets_list",
        parameters=[OpenApiParameter("team", str, many=True, explode=True, description="only these teams")],
        responses={200: BudgetStatusSerializer(many=True), **ERRORS},
    )
    def get(self, request):
        rows = budget_statuses(now=timezone.now(), visible_teams=visible_team_names(request.user),
                               teams=parse_text_list(request.query_params, "team"))
        return Response(BudgetStatusSerializer([r.as_dict() for r in rows], many=True).data)
