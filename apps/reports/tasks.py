"""Thin Celery task; twin command: `manage.py send_reports`."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="apps.reports.tasks.send_weekly_reports_task")
def send_weekly_reports_task() -> dict:
    from apps.reports.services import send_weekly_reports

    outcome = send_weekly_reports()
    return {"week": outcome.start.date().isoformat(), "waiting": outcome.waiting, "sent": outcome.sent,
            "failed": outcome.failed}
