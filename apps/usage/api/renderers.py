"""CSV rendering of usage rows (``?format=csv``): the domain's one usage CSV (`apps.usage.exports`)."""

from __future__ import annotations

from rest_framework.renderers import BaseRenderer

from apps.usage.exports import usage_csv


class UsageCSVRenderer(BaseRenderer):
    """The usage ``results`` as CSV: one column per group key, then the figures and coverage."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return usage_csv(data)
