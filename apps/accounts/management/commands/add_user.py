"""`manage.py add_user USERNAME [--email E] [--team T]... [--finance] [--staff]` (interfaces.md)."""

from __future__ import annotations

import getpass
import os

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.accounts.services import add_user


class Command(BaseCommand):
    help = (
        "Create or update a person. The password comes from GPUFINOPS_PASSWORD or a prompt (none keeps the "
        "current one). --team adds memberships (existing teams only); --finance and --staff see every team."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--email", default="")
        parser.add_argument("--team", action="append", default=[], help="repeatable")
        parser.add_argument("--finance", action="store_true", help="member of the finance group: sees every team")
        parser.add_argument("--staff", action="store_true", help="staff: sees every team and the admin")
        parser.add_argument("--no-password", action="store_true", help="do not prompt (keep or leave unset)")

    def handle(self, *args, **opts):
        password = os.environ.get("GPUFINOPS_PASSWORD")
        if password is None and not opts["no_password"] and opts.get("interactive", True):
            try:
                password = getpass.getpass(f"Password for {opts['username']} (empty keeps it): ") or None
            except (EOFError, KeyboardInterrupt):
                password = None
        try:
            user = add_user(opts["username"], password=password, email=opts["email"], teams=opts["team"],
                            finance=opts["finance"], staff=opts["staff"])
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        teams = ", ".join(sorted(user.teams.values_list("name", flat=True))) or "no team"
        self.stdout.write(f"{user.get_username()}: {teams}{', finance' if opts['finance'] else ''}"
                          f"{', staff' if user.is_staff else ''}")
