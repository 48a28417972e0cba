from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from apps.common.commands import time_option
from apps.common.timeutils import hours_between
from apps.ingest import services
from apps.inventory.models import Cluster


class Command(BaseCommand):
    help = "Collect and write every hourly bucket overlapping [since, until) (same code as the Celery task)."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", help="cluster name (default: all)")
        parser.add_argument("--since", help="ISO 8601; default: resume after the last final bucket")
        parser.add_argument("--until", help="ISO 8601; default: now")
        parser.add_argument(
            "--accept-loss",
            action="store_true",
            help="let a re-collection that finds less data (e.g. a wiped Prometheus) replace stored final hours",
        )

    def handle(self, *args, **opts):
        now = timezone.now()
        clusters = Cluster.objects.all()
        if opts["cluster"]:
            clusters = clusters.filter(name=opts["cluster"])
            if not clusters.exists():
                raise CommandError(f"no cluster named {opts['cluster']!r} (see add_cluster)")
        if not clusters.exists():
            raise CommandError("no clusters configured: run `manage.py add_cluster` first")
        until = time_option("until", opts["until"]) or now
        since = time_option("since", opts["since"])
        if since and since >= until:
            raise CommandError("--since must be before --until")
        problems = []
        for cluster in clusters:
            hours = hours_between(since, until) if since else None
            report = services.collect_cluster(
                cluster, hours, now=now, accept_loss=opts["accept_loss"], progress=lambda m: print(m, file=sys.stderr)
            )
            self.stdout.write(
                f"{cluster.name}: {len(report.written)} written, {len(report.failed)} failed, "
                f"{len(report.degraded)} kept (source had less), {len(report.not_attempted)} not attempted, "
                f"{len(report.skipped)} held by another worker"
            )
            if report.degraded:
                problems.append(
                    f"{cluster.name}: {len(report.degraded)} stored hours kept because the sources now have less "
                    f"({next(iter(report.degraded.values()))}); rerun with --accept-loss to replace them"
                )
            if report.failed or report.not_attempted:
                problems.append(f"{cluster.name}: {len(report.failed)} buckets failed "
                                f"({next(iter(report.failed.values()), 'source unreachable')}); they will be retried")
        if problems:
            raise CommandError("; ".join(problems))
