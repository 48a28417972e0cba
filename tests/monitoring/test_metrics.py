"""GET /metrics: per-cluster collection health computed from the database, protected, never naming teams."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from apps.common.timeutils import HOUR
from apps.inventory.models import Cluster
from apps.monitoring.models import CollectionRun
from apps.monitoring.services import record_run
from apps.usage.models import Bucket

ALLOWED_LABELS = {"cluster", "status", "state", "signal", "outcome", "version", "default_signal", "quantile"}


def scrape(client: Client, **extra) -> dict[str, dict[tuple, float]]:
    response = client.get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    samples: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for s in family.samples:
            assert set(s.labels) <= ALLOWED_LABELS, (s.name, s.labels)  # no team, namespace or pod label
            samples.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return samples


def value(samples, name, **labels) -> float:
    return samples[name][tuple(sorted(labels.items()))]


class Report:
    def __init__(self, written=(), failed=None, degraded=None, skipped=(), not_attempted=()):
        self.written, self.failed, self.degraded = list(written), dict(failed or {}), dict(degraded or {})
        self.skipped, self.not_attempted = list(skipped), list(not_attempted)


@pytest.fixture
def fleet(db):
    now = timezone.now()
    current = now.replace(minute=0, second=0, microsecond=0)
    prod = Cluster.objects.create(name="prod")
    stale = Cluster.objects.create(name="stale")
    Cluster.objects.filter(pk=stale.pk).update(created_at=now - timedelta(days=30))
    for i in range(1, 25):  # prod: a final OK day, the current hour provisional
        Bucket.objects.create(cluster=prod, hour=current - i * HOUR, state="final", status="ok",
                              series=8, signals=["gpu_util", "gr_engine_active", "sm_active", "tensor_active"])
    Bucket.objects.create(cluster=prod, hour=current, state="provisional", status="ok", series=8,
                          signals=["gpu_util", "gr_engine_active", "sm_active", "tensor_active"])
    # stale: last final OK bucket five hours back, two failing hours since, old abandoned ones, no SM activity.
    Bucket.objects.create(cluster=stale, hour=current - 6 * HOUR, state="final", status="ok", series=4,
                          signals=["gpu_util"])
    for i in (2, 3):
        Bucket.objects.create(cluster=stale, hour=current - i * HOUR, status="failed", last_error="Prometheus down")
    for i in (20, 21, 22):
        Bucket.objects.create(cluster=stale, hour=current - timedelta(days=i), status="abandoned")
    record_run(prod, started_at=now - timedelta(minutes=10), duration_seconds=4.0, report=Report(written=[1, 2]))
    record_run(prod, started_at=now - timedelta(minutes=5), duration_seconds=6.0, report=Report(written=[1]))
    record_run(stale, started_at=now - timedelta(hours=2), duration_seconds=3.0, report=Report(written=[1]))
    record_run(stale, started_at=now - timedelta(minutes=5), duration_seconds=30.0,
               report=Report(failed={current: "Prometheus down"}, not_attempted=[1, 2]))
    return {"prod": prod, "stale": stale, "now": now, "current": current}


def test_metrics_per_cluster(fleet, client):
    s = scrape(client)
    now = fleet["now"].timestamp()
    ((info_labels, info),) = s["gpufinops_info"].items()
    assert info == 1.0 and dict(info_labels)["default_signal"] == "sm_active" and dict(info_labels)["version"]
    # Last successful collection: prod 5 minutes ago (+6 s), stale 2 hours ago; its last run failed.
    assert abs(value(s, "gpufinops_last_successful_collection_timestamp_seconds", cluster="prod") - (now - 294)) < 5
    assert abs(value(s, "gpufinops_last_successful_collection_timestamp_seconds", cluster="stale")
               - (now - 7197)) < 5
    assert abs(value(s, "gpufinops_last_collection_timestamp_seconds", cluster="stale") - (now - 270)) < 5
    assert value(s, "gpufinops_last_collection_duration_seconds", cluster="stale") == 30.0
    assert value(s, "gpufinops_collection_duration_seconds_count", cluster="prod") == 2
    assert value(s, "gpufinops_collection_duration_seconds_sum", cluster="prod") == 10.0
    assert value(s, "gpufinops_collection_runs_total", cluster="stale", outcome="failed") == 1
    assert value(s, "gpufinops_collection_runs_total", cluster="stale", outcome="ok") == 1
    assert value(s, "gpufinops_collection_runs_total", cluster="prod", outcome="partial") == 0
    # Lag: prod's newest final bucket ended at the current hour; stale's five hours before it.
    minutes = (fleet["now"] - fleet["current"]).total_seconds() / 3600
    assert value(s, "gpufinops_bucket_lag_hours", cluster="prod") == pytest.approx(minutes, abs=0.01)
    assert value(s, "gpufinops_bucket_lag_hours", cluster="stale") == pytest.approx(5 + minutes, abs=0.01)
    # Buckets of the last 7 days by status and state (every combination, zeros included).
    assert value(s, "gpufinops_buckets", cluster="prod", status="ok", state="final") == 24
    assert value(s, "gpufinops_buckets", cluster="prod", status="ok", state="provisional") == 1
    assert value(s, "gpufinops_buckets", cluster="stale", status="failed", state="provisional") == 2
    assert value(s, "gpufinops_buckets", cluster="stale", status="abandoned", state="provisional") == 0  # > 7 days
    assert len(s["gpufinops_buckets"]) == 2 * len(Bucket.Status.values) * len(Bucket.State.values)
    assert value(s, "gpufinops_buckets_abandoned_total", cluster="stale") == 3
    assert value(s, "gpufinops_buckets_abandoned_total", cluster="prod") == 0
    # Signals: stale's DCGM series have GPU_UTIL only.
    assert value(s, "gpufinops_missing_signal", cluster="stale", signal="sm_active") == 1
    assert value(s, "gpufinops_missing_signal", cluster="stale", signal="gpu_util") == 0
    assert value(s, "gpufinops_missing_signal", cluster="prod", signal="sm_active") == 0


def test_a_cluster_never_collected(db, client):
    now = timezone.now()
    c = Cluster.objects.create(name="new")
    Cluster.objects.filter(pk=c.pk).update(created_at=now - timedelta(hours=2))
    s = scrape(client)
    assert value(s, "gpufinops_last_successful_collection_timestamp_seconds", cluster="new") == 0
    assert value(s, "gpufinops_bucket_lag_hours", cluster="new") == pytest.approx(2, abs=0.01)
    assert ("gpufinops_last_collection_timestamp_seconds" not in s
            or not any(dict(k).get("cluster") == "new" for k in s["gpufinops_last_collection_timestamp_seconds"]))


def test_access_needs_an_allowed_network_a_token_or_staff(db, settings, django_user_model):
    settings.GPUFINOPS_METRICS_TOKEN = "s3cret-token"
    settings.GPUFINOPS_METRICS_ALLOWED_NETWORKS = ["127.0.0.1/32", "10.42.0.0/16"]
    c = Client()
    assert c.get("/metrics").status_code == 200  # loopback
    assert c.get("/metrics", REMOTE_ADDR="10.42.3.4").status_code == 200  # an allowed network
    assert c.get("/metrics", REMOTE_ADDR="::ffff:10.42.3.4").status_code == 200
    assert c.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 403
    assert c.get("/metrics", REMOTE_ADDR="192.0.2.7", HTTP_AUTHORIZATION="Bearer s3cret-token").status_code == 200
    assert c.get("/metrics", REMOTE_ADDR="192.0.2.7", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert c.get("/metrics", REMOTE_ADDR="192.0.2.7", HTTP_AUTHORIZATION="Token s3cret-token").status_code == 403
    assert c.post("/metrics").status_code == 405
    user = django_user_model.objects.create_user("alice", password="pw-1234567890")
    c.force_login(user)
    assert c.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 403
    user.is_staff = True
    user.save()
    assert c.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 200
    settings.GPUFINOPS_METRICS_TOKEN = ""
    assert Client().get("/metrics", REMOTE_ADDR="192.0.2.7", HTTP_AUTHORIZATION="Bearer ").status_code == 403


def test_livez_touches_no_database(client):
    response = client.get("/livez")  # no db fixture: any query would raise
    assert response.status_code == 200 and response.content == b"ok\n"


def test_runs_are_pruned_but_totals_keep_counting(db, settings):
    settings.GPUFINOPS_COLLECTION_RUN_DAYS = 1
    c = Cluster.objects.create(name="c")
    now = timezone.now()
    record_run(c, started_at=now - timedelta(days=3), duration_seconds=1.0, report=Report(written=[1]))
    record_run(c, started_at=now, duration_seconds=2.0, report=Report(written=[1]))
    assert CollectionRun.objects.filter(cluster=c).count() == 1
    s = scrape(Client())
    assert value(s, "gpufinops_collection_runs_total", cluster="c", outcome="ok") == 2
    assert value(s, "gpufinops_collection_duration_seconds_sum", cluster="c") == 3.0
