"""`manage.py revoke_api_token USERNAME [--all | --prefix P]`: API tokens stop working at once."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.accounts.services import get_user, revoke_api_tokens


class Command(BaseCommand):
    help = "Revoke (delete) a user's API tokens: all of them, or the one whose printed token starts with PREFIX."

    def add_arguments(self, parser):
        parser.add_argument("username")
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--all", action="store_true", help="every token of the user")
        which.add_argument("--prefix", help="the token's first characters (shown in the admin), e.g. gfo_Ab12Cd")

    def handle(self, *args, **opts):
        try:
            user = get_user(opts["username"])
            revoked = revoke_api_tokens(user, prefix=None if opts["all"] else opts["prefix"])
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        if not revoked:
            raise CommandError(f"no matching token for {opts['username']!r}")
        self.stdout.write(f"revoked {revoked} token{'s' if revoked != 1 else ''} of {opts['username']}")
