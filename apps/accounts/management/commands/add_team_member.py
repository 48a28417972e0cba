"""`manage.py add_team_member TEAM USERNAME`: lets a user see one team's numbers."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.accounts.services import add_team_member


class Command(BaseCommand):
    help = "Make USERNAME a member of TEAM (an existing team; --create makes a new one)."

    def add_arguments(self, parser):
        parser.add_argument("team")
        parser.add_argument("username")
        parser.add_argument("--create", action="store_true", help="create the team if it does not exist")

    def handle(self, *args, **options):
        try:
            team = add_team_member(options["team"], options["username"], create=options["create"])
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(f"{options['username']} is a member of {team.name}")
