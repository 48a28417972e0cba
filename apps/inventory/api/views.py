"""Teams and clusters the caller may see. Invisible objects are absent from lists and 404 on detail."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.selectors import visible_team_names
from apps.common.api import FormatParamMixin, Pagination
from apps.common.serializers import DetailSerializer, ErrorSerializer
from apps.inventory.api.serializers import (
    ClusterDetailSerializer,
    ClusterSerializer,
    TeamDetailSerializer,
    TeamSerializer,
)
from apps.inventory.selectors import cluster_get, cluster_list, team_get, team_list

PAGE_PARAMS = [
    OpenApiParameter("page", int),
    OpenApiParameter("page_size", int, description=f"at most {Pagination.max_page_size}"),
]
LIST_ERRORS = {400: ErrorSerializer, 401: DetailSerializer}
DETAIL_ERRORS = {
    401: DetailSerializer,
    404: OpenApiResponse(DetailSerializer, description="no such object, or one the caller may not see"),
}


def _paginated(view: APIView, request, rows, serializer_class):  # type: ignore[no-untyped-def]
    paginator = Pagination()
    page = paginator.paginate_queryset(rows, request, view=view)
    return paginator.get_paginated_response(serializer_class(page, many=True).data)


class TeamListApi(FormatParamMixin, APIView):
    pagination_class = Pagination

    @extend_schema(
        operation_id="teams_list", parameters=PAGE_PARAMS, responses={200: TeamSerializer(many=True), **LIST_ERRORS}
    )
    def get(self, request):  # type: ignore[no-untyped-def]
        return _paginated(self, request, team_list(visible_teams=visible_team_names(request.user)), TeamSerializer)


class TeamDetailApi(FormatParamMixin, APIView):
    @extend_schema(operation_id="teams_retrieve", responses={200: TeamDetailSerializer, **DETAIL_ERRORS})
    def get(self, request, name: str):  # type: ignore[no-untyped-def]
        team = team_get(name=name, visible_teams=visible_team_names(request.user))
        if team is None:
            raise NotFound()
        return Response(TeamDetailSerializer(team).data)


class ClusterListApi(FormatParamMixin, APIView):
    pagination_class = Pagination

    @extend_schema(
        operation_id="clusters_list",
        parameters=PAGE_PARAMS,
        responses={200: ClusterSerializer(many=True), **LIST_ERRORS},
    )
    def get(self, request):  # type: ignore[no-untyped-def]
        clusters = cluster_list(visible_teams=visible_team_names(request.user))
        return _paginated(self, request, clusters, ClusterSerializer)


class ClusterDetailApi(FormatParamMixin, APIView):
    @extend_schema(operation_id="clusters_retrieve", responses={200: ClusterDetailSerializer, **DETAIL_ERRORS})
    def get(self, request, name: str):  # type: ignore[no-untyped-def]
        cluster = cluster_get(name=name, visible_teams=visible_team_names(request.user))
        if cluster is None:
            raise NotFound()
        return Response(ClusterDetailSerializer(cluster).data)
