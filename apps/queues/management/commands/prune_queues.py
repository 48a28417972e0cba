"""`manage.py prune_queues [--keep-days N]`: the twin of `prune_queue_history_task`."""

from __future__ import annotations

from apps.common.commands import PruneCommand
from apps.queues.services import prune_queue_history


class Command(PruneCommand):
    help = "Thin Kueue queue snapshots older than N days to the last one per hour."
    thinned = "queue collections"

    def prune(self, keep_days: int) -> int:
        return prune_queue_history(keep_days=keep_days)
