"""`manage.py ensure_partitions [--months-ahead N]`: the twin of `ensure_partitions_task`."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from apps.usage.partitions import ensure_partitions


class Command(BaseCommand):
    help = "Create the monthly partitions of the pod- and node-hour tables ahead (PostgreSQL; no-op elsewhere)."

    def add_arguments(self, parser):
        parser.add_argument("--months-ahead", type=int, default=3)

    def handle(self, *args, **opts):
        if not 0 <= opts["months_ahead"] <= 36:
            raise CommandError("--months-ahead must be between 0 and 36")
        created = ensure_partitions(months_ahead=opts["months_ahead"])
        self.stdout.write(f"created {len(created)} partitions: {', '.join(created) or 'none needed'}")
