"""`manage.py rebuild_findings [--cluster NAME] --since ISO [--until ISO]`: recompute, from the stored ledger rows
and snapshots alone, the findings they determine (idle allocations, missing signals, zero-allocatable nodes,
borrowed-while-idle) for hours collected before findings existed. Unhealthy GPUs, stragglers, idle-held and
unattributed activity need the hour's DCGM data: re-collect those hours (`collect --since`)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from apps.common.commands import time_option
from apps.common.timeutils import floor_hour, hours_between
from apps.findings.services import rebuild_from_ledger
from apps.inventory.models import Cluster


class Command(BaseCommand):
    help = "Recompute the ledger-determined findings of stored hours."

    def add_arguments(self, parser):
        parser.add_argument("--cluster")
        parser.add_argument("--since", required=True)
        parser.add_argument("--until")

    def handle(self, *args, **opts):
        since = time_option("since", opts["since"])
        until = time_option("until", opts["until"]) or timezone.now()
        if since is None:
            raise CommandError("--since is required")
        clusters = Cluster.objects.order_by("name")
        if opts["cluster"]:
            clusters = clusters.filter(name=opts["cluster"])
            if not clusters:
                raise CommandError(f"no cluster {opts['cluster']!r}")
        hours = hours_between(floor_hour(since), until)
        for cluster in clusters:
            n = rebuild_from_ledger(cluster, hours)
            self.stdout.write(f"{cluster.name}: {len(hours)} hours, {n} subject-hours flagged")
