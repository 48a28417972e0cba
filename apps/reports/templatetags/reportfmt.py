"""The reports' number formats (`apps/reports/formats.py`) as template filters: `{% load reportfmt %}`."""

from __future__ import annotations

from django import template

from apps.reports import formats

register = template.Library()
register.filter("usd", formats.usd)
register.filter("signed_usd", formats.signed_usd)
register.filter("gpuh", formats.gpuh)
register.filter("pct", formats.pct)
register.filter("signed_pct", formats.signed_pct)
register.filter("ratio_pct", formats.ratio_pct)
register.filter("arrow", formats.arrow)
