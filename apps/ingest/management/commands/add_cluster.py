from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import URLValidator

from apps.inventory.models import Cluster


class Command(BaseCommand):
    help = "Create or update a cluster gpufinops collects from."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--prometheus-url", required=True)
        parser.add_argument("--kubeconfig", default="", help="kubeconfig path (default: KUBECONFIG, ~/.kube/config)")
        parser.add_argument("--context", default="", help="kubeconfig context")
        parser.add_argument("--in-cluster", action="store_true", help="use the pod's service account")
        parser.add_argument("--prometheus-auth", default="", help="bearer token, or user:password for basic auth")
        parser.add_argument(
            "--metric", action="append", default=[], metavar="SIGNAL=METRIC",
            help="override a DCGM metric name, e.g. sm_active=DCGM_FI_PROF_SM_UTIL_RATIO",
        )

    def handle(self, *args, **opts):
        try:
            URLValidator(schemes=["http", "https"])(opts["prometheus_url"])
        except ValidationError as exc:
            raise CommandError(f"--prometheus-url is not an http(s) URL: {opts['prometheus_url']!r}") from exc
        if opts["in_cluster"] and opts["kubeconfig"]:
            raise CommandError("--in-cluster and --kubeconfig exclude each other")
        metrics = {}
        for item in opts["metric"]:
            signal, sep, metric = item.partition("=")
            if not sep or signal not in {"sm_active", "gr_engine_active", "tensor_active", "gpu_util"}:
                raise CommandError(f"--metric must be SIGNAL=METRIC with a known signal, got {item!r}")
            metrics[signal] = metric
        cluster, created = Cluster.objects.update_or_create(
            name=opts["name"],
            defaults={
                "source": Cluster.Source.KUBERNETES,
                "prometheus_url": opts["prometheus_url"].rstrip("/"),
                "prometheus_auth": opts["prometheus_auth"],
                "kubeconfig_path": opts["kubeconfig"],
                "kube_context": opts["context"],
                "in_cluster": opts["in_cluster"],
                **({"metric_names": metrics} if metrics else {}),
            },
        )
        self.stdout.write(f"{'created' if created else 'updated'} cluster {cluster.name}")
