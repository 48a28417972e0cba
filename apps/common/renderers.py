"""The API's renderers, importable from settings (DEFAULT_RENDERER_CLASSES) without DRF's views: money as decimal
strings in JSON, and the CSV of every list."""

from __future__ import annotations

import json
import re
from decimal import Decimal

import orjson
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.utils import encoders

from apps.common.csvfile import csv_bytes


class DecimalJSONEncoder(encoders.JSONEncoder):
    """DRF's encoder, with every Decimal (money) as a decimal string: exact, never a binary float."""

    def default(self, obj):
        if isinstance(obj, Decimal):
            return str(obj)
        return super().default(obj)


_ENCODER = DecimalJSONEncoder()
# JavaScript's line separators, escaped as DRF escapes them (JSON allows them raw, JavaScript string literals not).
_LINE_SEPARATORS = ((b"\xe2\x80\xa8", rb"\u2028"), (b"\xe2\x80\xa9", rb"\u2029"))


def _default(obj: object) -> object:
    """What orjson does not write itself, written as DRF's encoder writes it (money as decimal strings, datetimes
    in DRF's format: `orjson.OPT_PASSTHROUGH_DATETIME` hands them here)."""
    if obj.__class__ is Decimal:
        return str(obj)
    return _ENCODER.default(obj)


class DecimalJSONRenderer(JSONRenderer):
    """DRF's JSON with money as decimal strings, written by orjson when the answer is compact (every API client's
    case): the same bytes as DRF's `json.dumps` for our answers, about four times faster (a usage answer of 168 rows:
    1.0 -> 0.25 ms, bench/README.md "2026-12-02"). Floats are the shortest text that reads back as the same float
    in both (exponents are written `1e-7`, not `1e-07`); a non-finite float, which no figure is, would be written
    null instead of failing the request. Indented output (the browsable API) and anything orjson refuses (a key
    that is not a string) go through DRF's encoder as before."""

    encoder_class = DecimalJSONEncoder

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is None or not (self.compact and not self.ensure_ascii):
            return super().render(data, accepted_media_type, renderer_context)
        if self.get_indent(accepted_media_type, renderer_context or {}) is not None:
            return super().render(data, accepted_media_type, renderer_context)
        try:
            out = orjson.dumps(data, default=_default, option=orjson.OPT_PASSTHROUGH_DATETIME)
        except TypeError:  # orjson.JSONEncodeError: DRF's encoder says what is wrong, as it always did
            return super().render(data, accepted_media_type, renderer_context)
        for raw, escaped in _LINE_SEPARATORS:
            if raw in out:
                out = out.replace(raw, escaped)
        return out


_NUMBER = re.compile(r"-?\d+(\.\d+)?")


def _cell(value: object) -> object:
    """A serialized value as a CSV cell: nested objects as JSON, decimal strings (money) as numbers."""
    if isinstance(value, dict | list):
        return json.dumps(value, cls=DecimalJSONEncoder, sort_keys=True)
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        return Decimal(value)
    return value


class ListCSVRenderer(BaseRenderer):
    """A list's rows (``results``, every row, not one page) as CSV: one column per field, in the serializer's
    order; nested objects as JSON; through the one CSV writer (formula cells neutralised)."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        rows = data.get("results", []) if isinstance(data, dict) else []
        columns: list[str] = []
        for row in rows:
            columns.extend(k for k in row if k not in columns)
        return csv_bytes(columns, ([_cell(row.get(c)) for c in columns] for row in rows))
