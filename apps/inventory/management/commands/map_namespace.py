"""`manage.py map_namespace NAMESPACE TEAM [--cluster C] [--self-labelling] [--create]`."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.inventory.models import Cluster
from apps.inventory.services import map_namespace


class Command(BaseCommand):
    help = (
        "Charge NAMESPACE to TEAM. The mapping wins over pod and namespace team labels (a label naming another "
        "team is reported, not obeyed); --self-labelling lets the namespace's labels decide instead, the mapping "
        "covering what carries none."
    )

    def add_arguments(self, parser):
        parser.add_argument("namespace")
        parser.add_argument("team")
        parser.add_argument("--cluster", help="only in this cluster (default: every cluster)")
        labels = parser.add_mutually_exclusive_group()
        labels.add_argument("--enforced", action="store_true",
                            help="win over pod and namespace labels (the default; kept for old scripts)")
        labels.add_argument("--self-labelling", action="store_true",
                            help="the namespace's tenants label their own team: labels win over this mapping")
        parser.add_argument("--create", action="store_true", help="create the team if it does not exist")

    def handle(self, *args, **opts):
        cluster = None
        if opts["cluster"]:
            cluster = Cluster.objects.filter(name=opts["cluster"]).first()
            if cluster is None:
                raise CommandError(f"no cluster named {opts['cluster']!r}")
        try:
            mapping = map_namespace(
                opts["namespace"], opts["team"], cluster=cluster, enforced=not opts["self_labelling"],
                create_team=opts["create"],
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(f"{mapping} in {cluster.name if cluster else 'every cluster'}")
