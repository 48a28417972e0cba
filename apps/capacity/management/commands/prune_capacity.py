"""`manage.py prune_capacity [--keep-days N]`: the twin of `prune_capacity_history_task`."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from apps.capacity.services import prune_capacity_history
from apps.common.retention import FULL_RESOLUTION_DAYS


class Command(BaseCommand):
    help = "Thin fragmentation and pending-work snapshots older than N days to the last one per hour."

    def add_arguments(self, parser):
        parser.add_argument("--keep-days", type=int, default=FULL_RESOLUTION_DAYS)

    def handle(self, *args, keep_days: int, **options):
        if keep_days < 1:
            raise CommandError("--keep-days must be at least 1")
        deleted = prune_capacity_history(keep_days=keep_days)
        self.stdout.write(f"thinned {deleted} capacity collections")
