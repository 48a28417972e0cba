from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import URLValidator

from apps.common.redaction import redact_url
from apps.ingest.preflight import run_preflight, table
from apps.inventory.models import Cluster, prometheus_url_problem


class Command(BaseCommand):
    help = "Create or update a cluster gpufinops collects from."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--prometheus-url", required=True)
        parser.add_argument("--kubeconfig", default="", help="kubeconfig path (default: KUBECONFIG, ~/.kube/config)")
        parser.add_argument("--context", default="", help="kubeconfig context")
        parser.add_argument("--in-cluster", action="store_true", help="use the pod's service account")
        parser.add_argument(
            "--prometheus-auth", default="",
            help="bearer token, or user:password for basic auth (stored encrypted; prefer --prometheus-auth-file)",
        )
        parser.add_argument(
            "--prometheus-auth-file", default="",
            help="a file holding the credential (e.g. a mounted Kubernetes Secret), read at each collection",
        )
        parser.add_argument(
            "--metric", action="append", default=[], metavar="SIGNAL=METRIC",
            help="override a DCGM metric name, e.g. sm_active=DCGM_FI_PROF_SM_UTIL_RATIO",
        )
        parser.add_argument("--no-preflight", action="store_true",
                            help="do not run the preflight (check_cluster) after saving")

    def handle(self, *args, **opts):
        try:
            URLValidator(schemes=["http", "https"])(opts["prometheus_url"])
        except ValidationError:
            raise CommandError(
                f"--prometheus-url is not an http(s) URL: {redact_url(opts['prometheus_url'])}") from None
        problem = prometheus_url_problem(opts["prometheus_url"])
        if problem:
            raise CommandError(problem)
        if opts["in_cluster"] and opts["kubeconfig"]:
            raise CommandError("--in-cluster and --kubeconfig exclude each other")
        metrics = {}
        for item in opts["metric"]:
            signal, sep, metric = item.partition("=")
            if not sep or signal not in {"sm_active", "gr_engine_active", "tensor_active", "gpu_util"}:
                raise CommandError(f"--metric must be SIGNAL=METRIC with a known signal, got {item!r}")
            metrics[signal] = metric
        cluster = Cluster.objects.filter(name=opts["name"]).first()
        created = cluster is None
        cluster = cluster or Cluster(name=opts["name"])
        cluster.source = Cluster.Source.KUBERNETES
        cluster.set_prometheus_url(opts["prometheus_url"].rstrip("/"))
        cluster.prometheus_auth_file = opts["prometheus_auth_file"]
        if opts["prometheus_auth"]:
            cluster.prometheus_auth = opts["prometheus_auth"]
        cluster.kubeconfig_path, cluster.kube_context = opts["kubeconfig"], opts["context"]
        cluster.in_cluster = opts["in_cluster"]
        if metrics:
            cluster.metric_names = metrics
        try:
            cluster.full_clean(exclude=["prometheus_url"])
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        cluster.save()
        self.stdout.write(f"{'created' if created else 'updated'} cluster {cluster.name}")
        if not opts["no_preflight"]:
            # Told, never blocking: the cluster is saved whatever the preflight finds (check_cluster exits non-zero).
            try:
                self.stdout.write(table(run_preflight(cluster)))
            except Exception as exc:  # the preflight must never undo or fail the add
                self.stderr.write(f"preflight could not run: {type(exc).__name__}: {str(exc)[:300]}")
