"""`manage.py findings_opt_out USERNAME [--team T] [--undo]`: stop (or restart) a person's findings e-mails, for
one team or every team (the e-mails' own links do the same)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from apps.findings.notifications import opt_in, opt_out
from apps.inventory.models import Team


class Command(BaseCommand):
    help = "Opt a person out of (or, with --undo, back into) findings e-mails, for one team or every team."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--team", help="only this team's findings (default: every team)")
        parser.add_argument("--undo", action="store_true", help="opt back in")

    def handle(self, *args, **opts):
        user = get_user_model().objects.filter(username=opts["username"]).first()
        if user is None:
            raise CommandError(f"no user {opts['username']!r}")
        team = None
        if opts["team"]:
            team = Team.objects.filter(name=opts["team"]).first()
            if team is None:
                raise CommandError(f"no team {opts['team']!r}")
        scope = f"team {team.name}" if team else "every team"
        if opts["undo"]:
            opt_in(user, team)
            self.stdout.write(f"{user.username}: findings e-mails on for {scope}")
        else:
            opt_out(user, team)
            self.stdout.write(f"{user.username}: findings e-mails off for {scope}")
