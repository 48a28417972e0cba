"""`manage.py rotate_secrets [--new-key]`: re-encrypt every stored credential with the newest key."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from apps.common import secrets
from apps.inventory.models import Cluster


class Command(BaseCommand):
    help = (
        "Re-encrypt cluster credentials with the first key of GPUFINOPS_SECRETS_KEY. To rotate: put a new key "
        "in front (`--new-key` prints one), run this, then remove the old key."
    )

    def add_arguments(self, parser):
        parser.add_argument("--new-key", action="store_true", help="print a new key and do nothing else")

    def handle(self, *args, **opts):
        if opts["new_key"]:
            self.stdout.write(secrets.new_key())
            return
        done = 0
        try:
            with transaction.atomic():
                for cluster in Cluster.objects.select_for_update().exclude(prometheus_auth_encrypted=""):
                    cluster.prometheus_auth_encrypted = secrets.rotate(cluster.prometheus_auth_encrypted)
                    cluster.save(update_fields=["prometheus_auth_encrypted"])
                    done += 1
                # The secret path of a Prometheus URL (apps/inventory/models.py::Cluster.move_url_secrets).
                for cluster in Cluster.objects.select_for_update().exclude(prometheus_path_encrypted=""):
                    cluster.prometheus_path_encrypted = secrets.rotate(cluster.prometheus_path_encrypted)
                    cluster.save(update_fields=["prometheus_path_encrypted"])
        except secrets.SecretError as exc:
            raise CommandError(f"{exc}; nothing was changed") from exc
        self.stdout.write(f"re-encrypted {done} cluster credential{'s' if done != 1 else ''} with the newest key")
