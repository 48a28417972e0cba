from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_datetime

from apps.reports.services import send_weekly_reports


class Command(BaseCommand):
    help = "Email the last complete week's GPU cost report to every subscription that has not had it."

    def add_arguments(self, parser):
        parser.add_argument("--now", help="ISO 8601 instant to act as (default: now); the week before it is sent")
        parser.add_argument("--force", action="store_true", help="send even if some bucket of the week is not final")

    def handle(self, *args, **opts):
        now = None
        if opts["now"]:
            now = parse_datetime(opts["now"])
            if now is None or now.tzinfo is None:
                raise CommandError(f"--now must be an ISO 8601 time with a zone, got {opts['now']!r}")
        outcome = send_weekly_reports(now=now, force=opts["force"])
        week = f"week {outcome.start:%Y-%m-%d} .. {outcome.end:%Y-%m-%d}"
        if outcome.waiting:
            self.stdout.write(f"{week}: not sealed yet ({outcome.waiting}); nothing sent (use --force to send anyway)")
            return
        self.stdout.write(f"{week}: {len(outcome.sent)} sent, {len(outcome.skipped)} already sent or in progress")
        if outcome.failed:
            failures = "; ".join(f"{k}: {v}" for k, v in outcome.failed.items())
            raise CommandError(f"{len(outcome.failed)} failed (retried on the next run): {failures}")
