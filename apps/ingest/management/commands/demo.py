from __future__ import annotations

import secrets
import sys
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.inventory.models import Cluster, GpuPrice

# List prices per GPU-hour used only by the demo (a plausible cloud on-demand order of magnitude).
DEMO_PRICES = {
    "NVIDIA-H100-80GB-HBM3": "4.00",
    "NVIDIA-A100-SXM4-80GB": "2.50",
    "NVIDIA-A100-80GB-PCIe": "2.20",
    "NVIDIA-L4": "0.80",
    "NVIDIA-A30": "1.10",
    "Tesla-T4": "0.40",
}


class Command(BaseCommand):
    def _capacity_history(self, cluster, server, since: datetime, now: datetime) -> None:  # type: ignore[no-untyped-def]
        """Hourly capacity and queue snapshots for the week, read from the simulator set to each hour.

        A live installation builds this history one collection at a time; the demo replays it so the
        fragmentation chart has a past.
        """
        import dataclasses

        from apps.ingest import services
        from apps.ingest.collectors.kubernetes import api_client_for, read_snapshot

        api_client = api_client_for(cluster)
        at = since.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        while at <= now:
            server.set_time(at)
            snap = dataclasses.replace(read_snapshot(cluster, api_client), taken_at=at)
            services.record_side_snapshots(cluster, snap, api_client)
            at += timedelta(hours=1)
        server.set_time(now)
        self.stdout.write("capacity and queue history recorded hourly for the period")

    def _demo_user(self) -> None:
        """A first sign-in for the dashboard, only on a database with no users yet (never touches real ones)."""
        from django.contrib.auth import get_user_model

        users = get_user_model()
        if users.objects.exists():
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_user("demo", password=password, is_staff=True)
        self.stdout.write(self.style.SUCCESS(f"sign in at http://127.0.0.1:8000/ as demo / {password}"))

    help = "Seed the embedded demo: a simulated cluster and a week of ledger collected from it in-process."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--scenario", default="demo")
        parser.add_argument("--days", type=int, default=7)
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args, **opts):  # type: ignore[no-untyped-def]
        from apps.ingest import services
        from apps.ingest.collectors.simulated import SimulatedSource
        from apps.simulator.k8s_api import start_server
        from apps.simulator.scenario import build_scenario

        if opts["days"] < 1:
            raise CommandError("--days must be at least 1")
        now = datetime.now(UTC)
        end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        scenario = build_scenario(opts["scenario"], seed=opts["seed"], end=end, days=opts["days"] + 1)
        server = start_server(scenario, host="127.0.0.1", port=0)
        try:
            server.set_time(now)
            kubeconfig = settings.VAR_DIR / f"{scenario.cluster_name}.kubeconfig"
            server.write_kubeconfig(str(kubeconfig))
            cluster, _ = Cluster.objects.update_or_create(
                name=scenario.cluster_name,
                defaults={"source": Cluster.Source.SIMULATOR, "kubeconfig_path": str(kubeconfig),
                          "simulator_scenario": opts["scenario"], "simulator_seed": opts["seed"]},
            )
            since = now - timedelta(days=opts["days"])
            for model, usd in DEMO_PRICES.items():
                if not GpuPrice.objects.filter(gpu_model=model).exists():
                    GpuPrice.objects.create(gpu_model=model, usd_per_gpu_hour=Decimal(usd),
                                            effective_from=since.date() - timedelta(days=1))
            hours = services.hours_between(since, now)
            self.stdout.write(f"collecting {len(hours)} hours of {cluster.name} from the in-process simulator")
            report = services.collect_cluster(
                cluster, hours, now=now, source=SimulatedSource(scenario),
                progress=lambda m: print(m, file=sys.stderr),
            )
            self._capacity_history(cluster, server, since, now)
        finally:
            server.stop()
        self.stdout.write(f"{cluster.name}: {len(report.written)} buckets written, {len(report.failed)} failed")
        self._demo_user()
        if report.failed:
            raise CommandError(f"demo collection had failures: {next(iter(report.failed.values()))}")
