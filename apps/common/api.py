"""Shared DRF plumbing: the error shape, pagination with a maximum page size, format negotiation, and the
OpenAPI descriptions of the parameters and errors every endpoint shares.

Error shapes:

* bad input (any ``ValidationError``): ``400 {"errors": {"<param>": ["message", ...]}}``;
* everything else keeps DRF's own shape, e.g. ``401 {"detail": "..."}`` and ``404 {"detail": "Not found."}``.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from apps.common.params import param_error, parse_int
from apps.common.serializers import DetailSerializer, ErrorSerializer

NON_FIELD = "non_field_errors"


def _as_errors(detail) -> dict[str, list[str]]:
    """Flattens a ValidationError's detail into {"<param>": ["message", ...]}."""
    if isinstance(detail, dict):
        errors: dict[str, list[str]] = {}
        for key, value in detail.items():
            if isinstance(value, dict):
                for sub_key, sub_value in _as_errors(value).items():
                    errors[f"{key}.{sub_key}"] = sub_value
            elif isinstance(value, list | tuple):
                errors[str(key)] = [str(item) for item in value]
            else:
                errors[str(key)] = [str(value)]
        return errors
    if isinstance(detail, list | tuple):
        return {NON_FIELD: [str(item) for item in detail]}
    return {NON_FIELD: [str(detail)]}


def exception_handler(exc, context):
    """DRF's handler, with validation errors reshaped to name the bad parameter."""
    if isinstance(exc, DjangoValidationError):
        exc = ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    if isinstance(exc, ValidationError):
        return Response({"errors": _as_errors(exc.detail)}, status=status.HTTP_400_BAD_REQUEST)
    return drf_exception_handler(exc, context)


class Pagination(PageNumberPagination):
    """Page-number pagination: ``?page=N&page_size=M`` with M at most ``max_page_size``.

    Out-of-range or malformed ``page``/``page_size`` are a 400 naming the parameter (DRF's default
    answers an invalid page with 404, which reads as "this list does not exist").
    """

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000

    def get_page_size(self, request):
        return parse_int(
            request.query_params,
            self.page_size_query_param,
            default=self.page_size,
            min_value=1,
            max_value=self.max_page_size,
        )

    def paginate_queryset(self, queryset, request, view=None):
        parse_int(request.query_params, self.page_query_param, min_value=1)
        try:
            return super().paginate_queryset(queryset, request, view)
        except NotFound as exc:
            raise param_error(self.page_query_param, str(exc.detail)) from exc


# ---- What the OpenAPI document says of the parameters and errors every endpoint shares ----

CLUSTER_PARAM = OpenApiParameter("cluster", str, description="only this cluster (by name)")
TEAM_PARAM = OpenApiParameter("team", str, description="only this team (by name)")
PAGE_PARAMS = [
    OpenApiParameter("page", int),
    OpenApiParameter("page_size", int, description=f"at most {Pagination.max_page_size}"),
]
ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="a parameter is malformed or out of range; it is named"),
    401: OpenApiResponse(DetailSerializer, description="no or invalid credentials"),
}


class FormatParamMixin(APIView):
    """Turns an unknown ``?format=`` (DRF answers 404) into a 400 naming ``format``; errors are always JSON."""

    def perform_content_negotiation(self, request, force=False):
        try:
            return super().perform_content_negotiation(request, force)
        except (NotFound, Http404) as exc:
            formats = ", ".join(sorted({r.format for r in self.get_renderers()}))
            raise param_error("format", f"Unknown format; expected one of: {formats}.") from exc

    def finalize_response(self, request, response, *args, **kwargs):
        renderer = getattr(request, "accepted_renderer", None)
        if response.status_code >= 400 and renderer is not None and renderer.format not in {"json", "api"}:
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)


def paginated(view, request, rows, serializer_class):
    """One page of `rows` serialized, in DRF's paginated shape (count, next, previous, results)."""
    paginator = Pagination()
    page = paginator.paginate_queryset(rows, request, view=view)
    return paginator.get_paginated_response(serializer_class(page, many=True).data)
