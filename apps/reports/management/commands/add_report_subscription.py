from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_email

from apps.reports.models import ReportSubscription


class Command(BaseCommand):
    help = "Subscribe an email address to the weekly report (all teams, or only --team ones)."

    def add_arguments(self, parser):
        parser.add_argument("email")
        parser.add_argument("--team", action="append", default=[], help="limit to this team (repeatable)")

    def handle(self, *args, **opts):
        try:
            validate_email(opts["email"])
        except ValidationError as exc:
            raise CommandError(f"not an email address: {opts['email']!r}") from exc
        sub, created = ReportSubscription.objects.update_or_create(
            email=opts["email"], defaults={"teams": sorted(set(opts["team"])), "active": True}
        )
        self.stdout.write(f"{'subscribed' if created else 'updated'}: {sub}")
