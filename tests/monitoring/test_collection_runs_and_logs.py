"""A real collection (simulated cluster, production path) is recorded for /metrics, and every log line it
writes carries the cluster and the bucket, as JSON with LOG_FORMAT=json."""

from __future__ import annotations

import io
import json
import logging
import threading
from datetime import timedelta

import pytest
from django.test import Client

from apps.monitoring.logs import ContextFilter, JsonFormatter, PlainFormatter, log_context
from apps.monitoring.models import CollectionRun
from tests.harness.k8s_recorder import start_recorded_world
from tests.harness.services import free_port


@pytest.fixture
def world(tmp_path):
    yield from start_recorded_world(tmp_path)


class Captured:
    """JSON lines the production handler would print, for records of this thread (not the simulator's)."""

    def __init__(self) -> None:
        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.handler.setFormatter(JsonFormatter())
        self.handler.addFilter(ContextFilter())
        thread = threading.get_ident()
        self.handler.addFilter(lambda record: record.thread == thread)

    def __enter__(self) -> Captured:
        logging.getLogger().addHandler(self.handler)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger().removeHandler(self.handler)

    @property
    def lines(self) -> list[dict]:
        return [json.loads(line) for line in self.stream.getvalue().splitlines() if line.strip()]


@pytest.mark.django_db
def test_a_collection_is_recorded_and_scraped(world):
    from apps.ingest.services import collect_cluster
    from apps.inventory.models import Cluster

    cluster = Cluster.objects.create(name="sim", prometheus_url=world.prometheus_url, kubeconfig_path=world.kubeconfig)
    hours = [world.end - timedelta(hours=3), world.end - timedelta(hours=2)]
    with Captured() as captured:
        report = collect_cluster(cluster, hours=hours)
    assert report.written == hours
    run = CollectionRun.objects.get(cluster=cluster)
    assert (run.outcome, run.written, run.failed, run.not_attempted) == ("ok", 2, 0, 0)
    assert run.duration_seconds > 0 and run.finished_at > run.started_at
    lines = captured.lines
    assert lines, "a collection logs at least its run summary"
    for line in lines:
        assert line["cluster"] == "sim" and "bucket" in line, line
        assert {"timestamp", "level", "logger", "message"} <= set(line)
    (summary,) = [line for line in lines if line["logger"] == "apps.monitoring.services"]
    assert summary["outcome"] == "ok" and summary["bucket"] is None

    body = Client().get("/metrics").content.decode()
    assert 'gpufinops_collection_runs_total{cluster="sim",outcome="ok"} 1.0' in body
    assert 'gpufinops_collection_duration_seconds_count{cluster="sim"} 1.0' in body


@pytest.mark.django_db
def test_a_failing_bucket_logs_its_cluster_and_hour_and_the_run_is_failed(world):
    from apps.ingest.services import collect_cluster
    from apps.inventory.models import Cluster

    dead = f"http://127.0.0.1:{free_port()}"  # Prometheus unreachable: the first bucket fails, the run stops
    cluster = Cluster.objects.create(name="broken", prometheus_url=dead, kubeconfig_path=world.kubeconfig)
    hours = [world.end - timedelta(hours=3), world.end - timedelta(hours=2)]
    with Captured() as captured:
        report = collect_cluster(cluster, hours=hours)
    assert list(report.failed) == hours[:1] and report.not_attempted == hours[1:]
    run = CollectionRun.objects.get(cluster=cluster)
    assert (run.outcome, run.failed, run.not_attempted) == ("failed", 1, 1)
    assert "Prometheus" in run.error
    lines = captured.lines
    assert all(line["cluster"] == "broken" and "bucket" in line for line in lines)
    failed = [line for line in lines if line["logger"] == "apps.usage.services" and line["level"] == "WARNING"]
    assert failed and failed[0]["bucket"] == hours[0].isoformat()


@pytest.mark.django_db
def test_a_run_that_raises_is_recorded_and_reraised():
    from apps.inventory.models import Cluster
    from apps.monitoring.services import collection_run

    cluster = Cluster.objects.create(name="crash")

    @collection_run
    def collect(c):
        raise RuntimeError("database went away")

    with pytest.raises(RuntimeError):
        collect(cluster)
    run = CollectionRun.objects.get(cluster=cluster)
    assert run.outcome == "failed" and run.error == "RuntimeError: database went away"


def test_formatters_and_context():
    record_args = {"name": "apps.x", "level": logging.WARNING, "pathname": __file__, "lineno": 1,
                   "msg": "bucket %s failed", "args": ("h",), "exc_info": None}
    plain, js, flt = PlainFormatter(), JsonFormatter(), ContextFilter()
    record = logging.LogRecord(**record_args)
    flt.filter(record)
    assert "cluster" not in json.loads(js.format(record)) and not plain.format(record).endswith("]")
    with log_context(cluster="prod", bucket=None), log_context(bucket="2026-11-30T10:00:00+00:00"):
        record = logging.LogRecord(**record_args)
        flt.filter(record)
    data = json.loads(js.format(record))
    assert data["cluster"] == "prod" and data["bucket"] == "2026-11-30T10:00:00+00:00"
    assert data["level"] == "WARNING" and data["logger"] == "apps.x" and data["message"] == "bucket h failed"
    assert plain.format(record).endswith("[cluster=prod bucket=2026-11-30T10:00:00+00:00]")
    # extra= wins over the bound context
    with log_context(cluster="prod"):
        record = logging.LogRecord(**record_args)
        record.cluster = "explicit"
        flt.filter(record)
    assert json.loads(js.format(record))["cluster"] == "explicit"


def test_log_format_setting(settings):
    from django.conf import settings as django_settings

    handler = django_settings.LOGGING["handlers"]["console"]
    assert handler["filters"] == ["context"]
    assert handler["formatter"] == ("json" if django_settings.LOG_FORMAT == "json" else "plain")
    assert django_settings.CELERY_WORKER_HIJACK_ROOT_LOGGER is False
