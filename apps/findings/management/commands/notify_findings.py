"""`manage.py notify_findings [--now ISO]`: the beat's twin. Tells each team about its new findings (e-mail to its
members, its webhooks), once per finding and recipient, within the rate limit; retries failed sends whose backoff
has passed. Exits non-zero when a send failed this time (it is retried on a later run)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from apps.common.commands import time_option
from apps.findings.notifications import send_notifications


class Command(BaseCommand):
    help = "Send the findings notifications that are due (e-mail and team webhooks); each is recorded."

    def add_arguments(self, parser):
        parser.add_argument("--now", help="ISO 8601 time (UTC unless it has an offset) to act as (default: now)")

    def handle(self, *args, **opts):
        r = send_notifications(time_option("now", opts["now"]))
        self.stdout.write(f"{r.planned} new notification(s) planned; {r.sent} message(s) sent "
                          f"({r.summarized} told in summaries), {r.deferred} deferred by the rate limit, "
                          f"{r.failed} failed ({r.given_up} given up)")
        if r.failed:
            raise CommandError(f"{r.failed} notification(s) failed (retried later): {'; '.join(r.errors[:5])}")
