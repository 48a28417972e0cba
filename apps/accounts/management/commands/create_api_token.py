"""`manage.py create_api_token USERNAME [--expires-days N]`: prints a new API token, and nothing else."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.accounts.services import create_api_token


class Command(BaseCommand):
    help = "Create an API token for an existing user and print it on stdout (it is stored hashed)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--expires-days", type=int, default=None, help="validity in days (default 90)")

    def handle(self, *args, **options):
        user_model = get_user_model()
        try:
            user = user_model.objects.get(**{user_model.USERNAME_FIELD: options["username"]})
        except user_model.DoesNotExist as exc:
            raise CommandError(f"no user named {options['username']!r}") from exc
        try:
            token = create_api_token(user, options["expires_days"])
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(token)
