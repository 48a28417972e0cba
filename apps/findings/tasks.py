"""Thin Celery task; twin command: `manage.py notify_findings`."""

from __future__ import annotations

from dataclasses import asdict

from celery import shared_task


@shared_task(name="apps.findings.tasks.notify_findings_task")
def notify_findings_task() -> dict:
    """Tell the owners about new findings (e-mail and webhooks), once each, within the rate limit."""
    from apps.findings.notifications import send_notifications

    return asdict(send_notifications())
