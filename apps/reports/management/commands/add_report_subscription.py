"""`manage.py add_report_subscription EMAIL [--team T]... [--monthly]` (interfaces.md)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.reports.models import Cadence
from apps.reports.subscriptions import resolve_scope, subscribe


class Command(BaseCommand):
    help = ("Subscribe the person with this e-mail address to the weekly (or --monthly) report: every team they may "
            "see (recomputed at each send), or only the --team ones. Unknown teams and teams the person may not "
            "see are refused.")

    def add_arguments(self, parser):
        parser.add_argument("email")
        parser.add_argument("--team", action="append", default=[], help="only this team (repeatable)")
        parser.add_argument("--monthly", action="store_true", help="the calendar-month report instead of the weekly")

    def handle(self, *args, **opts):
        cadence = Cadence.MONTHLY if opts["monthly"] else Cadence.WEEKLY
        try:
            sub, created = subscribe(opts["email"], opts["team"], cadence=cadence)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        user = sub.user
        if user is None:  # subscribe() finds the person by e-mail or refuses
            raise CommandError(f"the subscription for {opts['email']} names no person")
        scope, _ = resolve_scope(sub)
        covers = scope.label + (" with the fleet's capacity" if scope and scope.fleet else "") if scope else "nothing"
        self.stdout.write(f"{'subscribed' if created else 'updated'}: {user.get_username()} <{user.email}> "
                          f"{cadence}, now covering {covers}")
