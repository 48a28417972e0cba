"""`manage.py prune_capacity [--keep-days N]`: the twin of `prune_capacity_history_task`."""

from __future__ import annotations

from apps.capacity.services import prune_capacity_history
from apps.common.commands import PruneCommand


class Command(PruneCommand):
    help = "Thin fragmentation and pending-work snapshots older than N days to the last one per hour."
    thinned = "capacity collections"

    def prune(self, keep_days: int) -> int:
        return prune_capacity_history(keep_days=keep_days)
