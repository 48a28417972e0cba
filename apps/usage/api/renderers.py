"""CSV rendering of usage rows (``?format=csv``)."""

from __future__ import annotations

import csv
import io

from rest_framework.renderers import BaseRenderer

from apps.usage.selectors import USAGE_FIELDS


class UsageCSVRenderer(BaseRenderer):
    """The usage ``results`` as CSV: one column per group key, then the figures and coverage."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):  # type: ignore[no-untyped-def]
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        columns = [*data.get("group_by", []), *USAGE_FIELDS, "coverage"]
        writer.writerow(columns)
        for row in data.get("results", []):
            writer.writerow(["" if row.get(c) is None else row.get(c) for c in columns])
        return buffer.getvalue().encode(self.charset)
