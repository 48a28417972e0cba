"""Celery tasks of the capacity app: thin wrappers of its services."""

from __future__ import annotations

from celery import shared_task


@shared_task
def prune_capacity_history_task() -> int:
    """Hourly: thin capacity snapshots older than 7 days to one per hour. Twin: `manage.py prune_capacity`."""
    from apps.capacity.services import prune_capacity_history

    return prune_capacity_history()
