"""Celery tasks of the queues app: thin wrappers of its services."""

from __future__ import annotations

from celery import shared_task


@shared_task
def prune_queue_history_task() -> int:
    """Hourly: thin Kueue snapshots older than 7 days to one per hour. Twin: `manage.py prune_queues`."""
    from apps.queues.services import prune_queue_history

    return prune_queue_history()
