"""`GET /api/v1/savings/`: the savings the caller may see over the period (the pages' periods), ranked by dollars
per month; JSON or `format=csv`. Parse parameters, call the selector, render."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
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
    WindowPagination,
    paginated,
    request_window,
)
from apps.common.params import parse_text
from apps.savings.api.serializers import SavingSerializer
from apps.savings.selectors import savings_list
from apps.usage.directory import refuse_unknown_filters


class SavingListApi(FormatParamMixin, APIView):
    pagination_class = WindowPagination
    renderer_classes = LIST_RENDERERS

    @extend_schema(
        operation_id="savings_list",
        parameters=[*PERIOD_PARAMS, CLUSTER_PARAM, TEAM_PARAM, *PAGE_PARAMS],
        responses={200: SavingSerializer(many=True), **ERRORS},
    )
    def get(self, request):
        teams = visible_team_names(request.user)
        refuse_unknown_filters(request.query_params, visible_teams=teams)
        window = request_window(request)
        found = savings_list(visible_teams=teams, start=window.start, end=window.end,
                             team=parse_text(request.query_params, "team"),
                             cluster=parse_text(request.query_params, "cluster"))
        return paginated(self, request, [s.as_dict() for s in found.items], SavingSerializer, window=window,
                         name="savings")
