"""Report archive and FOCUS export endpoints: parse parameters, call the reports app, render. Nothing else.

* `GET /api/v1/reports/`: every edition the caller may see (paginated, newest first) and the due periods;
* `GET /api/v1/reports/<period>/` (`2026-W47`, `2026-11`; `?scope=&version=`): one edition (default: the
  caller's own scope, latest version) with its totals and digests, and the period's other editions; a period
  with no edition yet answers the report as it would be made now (`version` null, nothing stored);
* `GET /api/v1/reports/<period>/csv` and `.../focus`: the edition's files, exactly the bytes that were sent;
* `GET /api/v1/exports/focus/?start=&end=&granularity=day|hour&version=1.2|1.3`: FOCUS rows of the whole fleet
  (1.2 by default; 1.3 is the split-cost-allocation form) (finance and staff only: 403 for anyone else, since the
  export is every team's spend and the unallocated capacity).
"""

from __future__ import annotations

import base64
import hashlib

from django.conf import settings
from django.http import HttpResponse, StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.renderers import BaseRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.selectors import sees_all_teams
from apps.common.api import (
    ERRORS,
    LIST_RENDERERS,
    PERIOD_PARAMS,
    DecimalJSONRenderer,
    FormatParamMixin,
    Pagination,
    request_window,
)
from apps.common.params import param_error, parse_choice, parse_int, parse_text
from apps.common.serializers import DetailSerializer
from apps.reports import focus
from apps.reports.api.serializers import EditionDetailSerializer, EditionListSerializer
from apps.reports.archive import (
    ChooseScope,
    choose_edition,
    due_periods,
    due_report,
    edition_detail,
    edition_summary,
)
from apps.reports.periods import Period, parse_period
from apps.reports.selectors import editions_visible_to

NOT_FOUND = {404: OpenApiResponse(DetailSerializer, description="no such report, or none the caller may see")}
PERIOD_PARAM = OpenApiParameter("period", str, OpenApiParameter.PATH,
                                description="an ISO week (2026-W47) or a calendar month (2026-11), UTC")
SCOPE_PARAM = OpenApiParameter("scope", str, description="all, or team-<a>+<b>; default: the caller's own")
VERSION_PARAM = OpenApiParameter("version", int, description="edition version; default: the latest")


class CSVFileRenderer(BaseRenderer):
    """Stored CSV files, passed through (errors are JSON)."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data if isinstance(data, bytes) else b""


def _period(value: str) -> Period:
    try:
        return parse_period(value)
    except ValueError as exc:
        raise param_error("period", str(exc)) from exc


def _file_response(content: bytes, filename: str) -> HttpResponse:
    response = HttpResponse(content, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    # RFC 9530: the SHA-256 of exactly these bytes (the digest printed in the e-mail).
    response["Repr-Digest"] = f"sha-256=:{base64.b64encode(hashlib.sha256(content).digest()).decode()}:"
    return response


class ReportListApi(FormatParamMixin, APIView):
    """Every report edition the caller may see, newest first, and the periods still due."""

    renderer_classes = LIST_RENDERERS

    @extend_schema(
        operation_id="reports_list",
        parameters=[OpenApiParameter("page", int), OpenApiParameter("page_size", int)],
        responses={200: EditionListSerializer, **ERRORS},
    )
    def get(self, request):
        editions = editions_visible_to(request.user).order_by("-period_start", "kind", "scope", "-version")
        if request.accepted_renderer.format == "csv":  # every edition, one row each
            response = Response({"results": [edition_summary(e) for e in editions.defer("csv_bytes", "focus_bytes")]})
            response["Content-Disposition"] = 'attachment; filename="gpufinops-reports.csv"'
            return response
        paginator = Pagination()
        page = paginator.paginate_queryset(editions.defer("csv_bytes", "focus_bytes"), request, view=self)
        response = paginator.get_paginated_response([edition_summary(e) for e in page])
        response.data["due"] = due_periods(request.user, timezone.now())
        return response


class _EditionMixin:
    def edition_or_due(self, request, period: str):
        p = _period(period)
        params = request.query_params
        scope = parse_text(params, "scope", max_length=200)
        version = parse_int(params, "version", min_value=1, max_value=1_000_000)
        try:
            edition = choose_edition(request.user, p, scope=scope, version=version)
        except ChooseScope as exc:
            raise param_error("scope", str(exc)) from exc
        if edition is not None:
            return p, edition, None
        if version is None:
            due = due_report(request.user, p, timezone.now(), scope=scope)
            if due is not None:
                return p, None, due
        raise NotFound()


class ReportDetailApi(_EditionMixin, FormatParamMixin, APIView):
    """One period's report: status, version, totals and the SHA-256 of its files."""

    @extend_schema(
        operation_id="reports_retrieve",
        parameters=[PERIOD_PARAM, SCOPE_PARAM, VERSION_PARAM],
        responses={200: EditionDetailSerializer, **ERRORS, **NOT_FOUND},
    )
    def get(self, request, period: str):
        p, edition, due = self.edition_or_due(request, period)
        if due is not None:
            return Response(due.detail(request.user))
        data = edition_detail(edition)
        data["editions"] = [edition_summary(e) for e in editions_visible_to(request.user, period=p.label)
                            .filter(kind=p.kind).defer("csv_bytes", "focus_bytes").order_by("scope", "version")]
        return Response(data)


class ReportFileApi(_EditionMixin, FormatParamMixin, APIView):
    """The edition's CSV (`csv`) or FOCUS file (`focus`): the exact bytes sent, with their digest."""

    renderer_classes = [CSVFileRenderer, DecimalJSONRenderer]
    which = "csv"

    def get(self, request, period: str):
        p, edition, due = self.edition_or_due(request, period)
        if due is not None:
            content = due.content.csv if self.which == "csv" else due.content.focus
            suffix = "" if self.which == "csv" else "-focus"
            return _file_response(content, f"gpufinops-{p.label}-due-{due.scope.key}{suffix}.csv")
        if self.which == "csv":
            return _file_response(bytes(edition.csv_bytes), edition.csv_name)
        return _file_response(bytes(edition.focus_bytes), edition.focus_name)


class ReportCsvApi(ReportFileApi):
    which = "csv"

    @extend_schema(operation_id="reports_csv", parameters=[PERIOD_PARAM, SCOPE_PARAM, VERSION_PARAM],
                   responses={(200, "text/csv"): OpenApiTypes.STR, **ERRORS, **NOT_FOUND})
    def get(self, request, period: str):
        return super().get(request, period)


class ReportFocusApi(ReportFileApi):
    which = "focus"

    @extend_schema(operation_id="reports_focus", parameters=[PERIOD_PARAM, SCOPE_PARAM, VERSION_PARAM],
                   responses={(200, "text/csv"): OpenApiTypes.STR, **ERRORS, **NOT_FOUND})
    def get(self, request, period: str):
        return super().get(request, period)


def _finance_only(request) -> None:
    if not sees_all_teams(request.user):
        raise PermissionDenied("The FOCUS export is for finance and staff: it holds every team's spend and the "
                               "unallocated capacity. Team members: /api/v1/usage/?format=csv.")


class FocusExportApi(FormatParamMixin, APIView):
    """FOCUS 1.2 cost and usage rows of the whole fleet over `[start, end)`: one per pod, GPU model and charge
    period, plus unallocated capacity rows, so that the sum of BilledCost is the fleet's capacity cost."""

    renderer_classes = [CSVFileRenderer, DecimalJSONRenderer]

    @extend_schema(
        operation_id="exports_focus",
        parameters=[
            *PERIOD_PARAMS,
            OpenApiParameter("granularity", str, enum=list(focus.GRANULARITIES),
                             description="charge period: a UTC day (default) or an hour (ranges up to "
                                         "GPUFINOPS_API_MAX_HOURLY_DAYS)"),
            OpenApiParameter("version", str, enum=list(focus.VERSIONS),
                             description="FOCUS version: 1.2 (default, a row per pod and per node's unallocated "
                                         "capacity) or 1.3 (split cost allocation: each node's capacity cost as "
                                         "allocated charges, AllocatedMethodId and the allocation columns)"),
        ],
        responses={(200, "text/csv"): OpenApiTypes.STR, **ERRORS,
                   403: OpenApiResponse(DetailSerializer, description="not finance or staff")},
    )
    def get(self, request):
        _finance_only(request)
        params = request.query_params
        granularity = parse_choice(params, "granularity", focus.GRANULARITIES, default="day")
        version = parse_choice(params, "version", focus.VERSIONS, default=focus.FOCUS_VERSION)
        window = request_window(request, max_days=settings.GPUFINOPS_FOCUS_MAX_DAYS)
        start, end = window.start, window.end
        hourly_days = settings.GPUFINOPS_API_MAX_HOURLY_DAYS
        if granularity == "hour" and window.days > hourly_days:
            raise param_error("granularity", f"Hourly charge periods cover at most {hourly_days} days; narrow "
                                             "start/end or use granularity=day.")
        if granularity == "day" and (start.hour or end.hour):
            raise param_error("start" if start.hour else "end",
                              "Daily charge periods need whole UTC days (midnight); use dates, or granularity=hour.")
        cutoff = focus.retention_cutoff(timezone.now())
        if cutoff is not None and start < cutoff:
            raise param_error("start", f"Pod and node rows before {cutoff:%Y-%m-%d} are pruned "
                                       "(GPUFINOPS_LEDGER_KEEP_MONTHS): start on or after it. The report archive "
                                       "keeps the FOCUS file of every edition it sent.")
        chunks = focus.focus_csv_chunks(start=start, end=end, granularity=granularity, version=version)
        response = StreamingHttpResponse(chunks, content_type="text/csv; charset=utf-8")
        parts = ("focus", granularity) if version == focus.FOCUS_VERSION else ("focus", version, granularity)
        response["Content-Disposition"] = f'attachment; filename="{window.filename(*parts)}"'
        return response


class FocusMetadataApi(FormatParamMixin, APIView):
    """FOCUS metadata of the export: version, generator, and the definition of every `x_` column."""

    @extend_schema(operation_id="exports_focus_metadata",
                   parameters=[OpenApiParameter("version", str, enum=list(focus.VERSIONS),
                                                description="FOCUS version (default 1.2)")],
                   responses={200: OpenApiTypes.OBJECT, **ERRORS,
                              403: OpenApiResponse(DetailSerializer, description="not finance or staff")})
    def get(self, request):
        _finance_only(request)
        version = parse_choice(request.query_params, "version", focus.VERSIONS, default=focus.FOCUS_VERSION)
        return Response(focus.focus_metadata(version=version))
