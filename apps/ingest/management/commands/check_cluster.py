from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_datetime

from apps.ingest.preflight import run_preflight, table
from apps.inventory.models import Cluster


class Command(BaseCommand):
    help = ("Preflight a cluster: ask its Kubernetes API and Prometheus whether everything the ledger needs is "
            "there; print each check, what was found, pass/warn/fail and the fix. Exits 1 when a check failed "
            "(hours would be unmeasured or unattributed).")

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--at", help="Prometheus evaluation time (ISO 8601, with offset); default now")

    def handle(self, *args, **opts):
        cluster = Cluster.objects.filter(name=opts["name"]).first()
        if cluster is None:
            raise CommandError(f"no cluster {opts['name']!r} (add it with add_cluster)")
        at = parse_datetime(opts["at"]) if opts["at"] else None
        if opts["at"] and (at is None or at.tzinfo is None):
            raise CommandError("--at must be an ISO 8601 time with an offset, e.g. 2026-12-01T12:00:00Z")
        result = run_preflight(cluster, at=at)
        self.stdout.write(table(result))
        if not result.ok:
            raise SystemExit(1)
