"""Shared DRF plumbing: the error envelope, pagination with a maximum page size, format negotiation, money as
decimal strings, CSV of every list, the request's period, and the OpenAPI descriptions of the parameters and
errors every endpoint shares.

One error envelope for every status: ``{"detail": "<one line>", "errors": {"<param>": ["message", ...]}}``.
Bad input (400) names each bad parameter in ``errors``; 401, 403, 404, 405, 429 have ``errors`` empty.

Money is a decimal string everywhere (``"12.340000"``, exact to the micro-dollar): the JSON renderer
(`apps.common.renderers`) writes every `Decimal` as a string, and `MoneyField` says so in the schema.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.renderers import BrowsableAPIRenderer
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from apps.common.params import param_error, parse_int
from apps.common.periods import Window, api_window
from apps.common.renderers import DecimalJSONRenderer, ListCSVRenderer
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


def _summary(errors: dict[str, list[str]]) -> str:
    names = ", ".join(k for k in errors if k != NON_FIELD)
    return f"Bad parameter: {names}." if names else "Bad request: " + " ".join(errors.get(NON_FIELD, []))


def exception_handler(exc, context):
    """DRF's handler, every answer in the one envelope: `detail` and the bad parameters in `errors`."""
    if isinstance(exc, DjangoValidationError):
        exc = ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    if isinstance(exc, ValidationError):
        errors = _as_errors(exc.detail)
        return Response({"detail": _summary(errors), "errors": errors}, status=status.HTTP_400_BAD_REQUEST)
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(response.data, dict) and "errors" not in response.data:
        detail = response.data.get("detail", "")
        response.data = {"detail": str(detail), "errors": {}}
    return response


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


class WindowPagination(Pagination):
    """A list over a period: the page, with the period's bounds echoed (`start`, `end`)."""

    def get_paginated_response_schema(self, schema):
        out = super().get_paginated_response_schema(schema)
        out["properties"] = {
            "start": {"type": "string", "format": "date-time", "example": "2026-11-23T00:00:00Z"},
            "end": {"type": "string", "format": "date-time", "example": "2026-11-30T00:00:00Z"},
            **out["properties"],
        }
        out["required"] = sorted({*out.get("required", []), "start", "end"})
        return out


# ---- What the OpenAPI document says of the parameters and errors every endpoint shares ----

PERIOD_PARAMS = [
    OpenApiParameter("period", str, description="an ISO week (2026-W48) or a month (2026-11), as on the pages"),
    OpenApiParameter("days", int, description="the last N whole UTC days, today included (default: 7)"),
    OpenApiParameter("start", str, description="custom range: ISO 8601 time or date (UTC) on the hour, inclusive; "
                     "alone: 7 days from it"),
    OpenApiParameter("end", str, description="custom range: exclusive; alone: the 7 days up to it"),
]
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
        # No renderer yet means negotiation itself failed (an unknown ?format=): DRF would then force the view's
        # first renderer, which for a file endpoint is CSV and prints the error as nothing.
        if response.status_code >= 400 and (renderer is None or renderer.format not in {"json", "api"}):
            request.accepted_renderer = DecimalJSONRenderer()
            request.accepted_media_type = DecimalJSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)


def request_window(request, *, max_days: int | None = None, max_hourly_days: int | None = None) -> Window:
    """The period a request names, by the one period rule (`apps.common.periods`): the pages' syntax, the pages'
    default (the last 7 days, today included); a 400 naming the parameter otherwise."""
    return api_window(request.query_params, timezone.now(),
                      max_days=settings.GPUFINOPS_API_MAX_RANGE_DAYS if max_days is None else max_days,
                      max_hourly_days=max_hourly_days)


LIST_RENDERERS = [DecimalJSONRenderer, BrowsableAPIRenderer, ListCSVRenderer]


class NoSuchEndpoint(FormatParamMixin, APIView):
    """Any other /api/v1/ path (`findings/-1/`, a typo): the one error envelope, 404, never an HTML page."""

    @extend_schema(exclude=True)
    def get(self, request, *args, **kwargs):
        raise NotFound()

    post = put = patch = delete = get


def paginated(view, request, rows, serializer_class, *, window: Window | None = None, name: str = ""):
    """One page of `rows` serialized, in DRF's paginated shape (count, next, previous, results), with the
    period's `start` and `end` when the list is over one; with `format=csv`, every row as CSV (at most
    GPUFINOPS_API_MAX_ROWS) named by the list and its period's bounds."""
    if getattr(request, "accepted_renderer", None) is not None and request.accepted_renderer.format == "csv":
        limit = settings.GPUFINOPS_API_MAX_ROWS
        chosen = list(rows[: limit + 1])
        if len(chosen) > limit:
            raise param_error("format", f"More than {limit:,} rows: narrow the filters or the period for a CSV, or "
                                        "page through the JSON.")
        response = Response({"results": serializer_class(chosen, many=True).data})
        filename = window.filename(name) if window is not None else f"gpufinops-{name}.csv"
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response
    paginator = Pagination()
    page = paginator.paginate_queryset(rows, request, view=view)
    response = paginator.get_paginated_response(serializer_class(page, many=True).data)
    if window is not None:
        response.data = {"start": window.start, "end": window.end, **response.data}
    return response
