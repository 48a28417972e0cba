"""Celery tasks of the ledger: thin wrappers of its services, each with a command twin."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="apps.usage.tasks.ensure_partitions_task")
def ensure_partitions_task() -> list[str]:
    """Daily: the coming months' pod- and node-hour partitions (PostgreSQL). Twin: `manage.py ensure_partitions`."""
    from apps.usage.partitions import ensure_partitions

    return ensure_partitions()


@shared_task(name="apps.usage.tasks.prune_ledger_task")
def prune_ledger_task() -> int:
    """Daily: pod and node rows older than GPUFINOPS_LEDGER_KEEP_MONTHS. Twin: `manage.py prune_ledger`."""
    from apps.usage.services import prune_ledger

    return prune_ledger()
