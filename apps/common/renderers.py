"""The API's renderers, importable from settings (DEFAULT_RENDERER_CLASSES) without DRF's views: money as decimal
strings in JSON, and the CSV of every list."""

from __future__ import annotations

import json
import re
from decimal import Decimal

from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.utils import encoders

from apps.common.csvfile import csv_bytes


class DecimalJSONEncoder(encoders.JSONEncoder):
    """DRF's encoder, with every Decimal (money) as a decimal string: exact, never a binary float."""

    def default(self, obj):
        if isinstance(obj, Decimal):
            return str(obj)
        return super().default(obj)


class DecimalJSONRenderer(JSONRenderer):
    encoder_class = DecimalJSONEncoder


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
