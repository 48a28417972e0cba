"""One function per email, three templates each: templates/emails/<name>-subject.txt, -body.txt, -body.html."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string


def make_message(
    name: str, to: list[str], ctx: dict[str, Any], attachments: list[tuple[str, bytes, str]] = ()
) -> EmailMultiAlternatives:
    subject = " ".join(render_to_string(f"emails/{name}-subject.txt", ctx).split())
    msg = EmailMultiAlternatives(subject, render_to_string(f"emails/{name}-body.txt", ctx),
                                 settings.DEFAULT_FROM_EMAIL, to)
    msg.attach_alternative(render_to_string(f"emails/{name}-body.html", ctx), "text/html")
    for filename, content, mimetype in attachments:
        msg.attach(filename, content, mimetype)
    return msg


def weekly_report(to: str, ctx: dict[str, Any], csv_bytes: bytes) -> EmailMultiAlternatives:
    filename = f"gpufinops-{ctx['start']:%Y-%m-%d}.csv"
    return make_message("weekly-report", [to], ctx, [(filename, csv_bytes, "text/csv")])
