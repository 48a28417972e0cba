"""`urlize` that links nothing, loaded as a template builtin after Django's own (settings.TEMPLATES).

DRF's browsable API prints every answer through `urlize`, which turns any URL or bare domain in it into a
link; team, namespace and workload names are tenant-written (a team `evil.example.com` is a valid label
value), so an answer would carry links the tenant chose. Answers are shown as text, escaped, instead.
"""

from __future__ import annotations

from django import template
from django.utils.html import conditional_escape

register = template.Library()


@register.filter(needs_autoescape=True)
def urlize(value: object, autoescape: bool = True) -> str:
    return conditional_escape(str(value)) if autoescape else str(value)
