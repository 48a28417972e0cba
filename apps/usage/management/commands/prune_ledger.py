"""`manage.py prune_ledger [--keep-months N]`: the twin of `prune_ledger_task`."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.usage.services import prune_ledger


class Command(BaseCommand):
    help = "Drop pod and node rows older than N whole months (rollups are kept): GPUFINOPS_LEDGER_KEEP_MONTHS."

    def add_arguments(self, parser):
        parser.add_argument("--keep-months", type=int, default=None)

    def handle(self, *args, **opts):
        keep = settings.GPUFINOPS_LEDGER_KEEP_MONTHS if opts["keep_months"] is None else opts["keep_months"]
        if keep < 0:
            raise CommandError("--keep-months must be 0 (keep everything) or more")
        removed = prune_ledger(keep_months=keep)
        self.stdout.write(f"removed {removed} {'partitions or rows' if removed else 'nothing'} "
                          f"(keeping {keep or 'all'} months of pod and node rows)")
