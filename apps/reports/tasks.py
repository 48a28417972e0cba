"""Thin Celery tasks; twin command: `manage.py send_reports [--kind weekly|monthly]`."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="apps.reports.tasks.send_reports_task")
def send_reports_task(kind: str | None = None) -> dict:
    """The weekly or monthly check (both when `kind` is None): due periods, then restatements."""
    from apps.reports.periods import KINDS
    from apps.reports.services import send_reports

    return send_reports(kinds=(kind,) if kind else KINDS).as_dict()


@shared_task(name="apps.reports.tasks.send_weekly_reports_task")
def send_weekly_reports_task() -> dict:
    """Kept for beat schedules written before monthly reports existed: the weekly check."""
    return send_reports_task("weekly")
