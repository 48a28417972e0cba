"""Periodic task (gpufinops/celery.py); twin: `manage.py check_budgets`."""

from __future__ import annotations

from celery import shared_task

from apps.budgets.services import check_budgets


@shared_task(name="apps.budgets.tasks.check_budgets_task")
def check_budgets_task() -> dict[str, int]:
    report = check_budgets()
    return {"budgets": report.budgets, "planned": report.planned, "sent": report.sent, "failed": report.failed}
