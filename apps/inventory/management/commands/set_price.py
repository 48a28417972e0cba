from __future__ import annotations

from datetime import date
from decimal import Decimal, InvalidOperation

from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_date

from apps.inventory.models import Cluster
from apps.inventory.services import set_price


class Command(BaseCommand):
    help = "Set the USD price of one physical GPU-hour for a GPU model (nvidia.com/gpu.product)."

    def add_arguments(self, parser):
        parser.add_argument("gpu_model")
        parser.add_argument("usd_per_gpu_hour")
        parser.add_argument("--cluster", help="only for this cluster")
        parser.add_argument("--effective-from", help="YYYY-MM-DD (default: today, UTC)")

    def handle(self, *args, **opts):
        try:
            usd = Decimal(opts["usd_per_gpu_hour"])
        except InvalidOperation as exc:
            raise CommandError(f"USD_PER_GPU_HOUR must be a number, got {opts['usd_per_gpu_hour']!r}") from exc
        if not usd.is_finite() or usd < 0:
            raise CommandError("USD_PER_GPU_HOUR must be a finite number >= 0")
        effective = date.today()
        if opts["effective_from"]:
            parsed = parse_date(opts["effective_from"])
            if parsed is None:
                raise CommandError(f"--effective-from must be YYYY-MM-DD, got {opts['effective_from']!r}")
            effective = parsed
        cluster = None
        if opts["cluster"]:
            cluster = Cluster.objects.filter(name=opts["cluster"]).first()
            if cluster is None:
                raise CommandError(f"no cluster named {opts['cluster']!r}")
        price = set_price(opts["gpu_model"], usd, effective, cluster)
        self.stdout.write(str(price))
