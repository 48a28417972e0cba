"""Outages, broken answers and crashes: buckets are marked, retried, and end up as a clean run would."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from apps.ingest.services import collect_cluster
from apps.usage.models import Bucket, PodHour
from tests.ingest.conftest import make_cluster


def rows_without_ids(cluster, hours=None):
    fields = [f.attname for f in PodHour._meta.fields if f.attname not in ("id", "cluster_id")]
    rows = PodHour.objects.filter(cluster=cluster)
    if hours is not None:
        rows = rows.filter(hour__in=hours)
    return list(rows.order_by(*fields).values_list(*fields))


@pytest.mark.django_db
def test_it_fills_buckets_after_a_prometheus_outage(sim_world):
    hours = sim_world.hours[-3:]
    reference = make_cluster(sim_world, name="reference")
    assert collect_cluster(reference, hours, now=sim_world.end).ok
    cluster = make_cluster(sim_world, name="outage")
    sim_world.prometheus.stop()
    try:
        report = collect_cluster(cluster, hours, now=sim_world.end)
    finally:
        sim_world.prometheus.start()
    # The first bucket fails and stops the run (circuit breaker); the others are left for the next run.
    assert set(report.failed) == {hours[0]} and report.not_attempted == hours[1:]
    failed = Bucket.objects.filter(cluster=cluster, hour__in=hours)
    assert {b.status for b in failed} == {"failed"} and failed.count() == 1
    assert all("Prometheus" in b.last_error for b in failed)
    assert not PodHour.objects.filter(cluster=cluster).exists()
    # The next cycles pick the failed buckets up once their backoff has passed (driven by bucket state).
    later = sim_world.end + timedelta(minutes=5)
    collect_cluster(cluster, None, now=later)
    done = Bucket.objects.filter(cluster=cluster, hour__in=hours)
    assert {(b.status, b.state) for b in done} == {("ok", "final")}
    assert rows_without_ids(cluster, hours) == rows_without_ids(reference, hours)


@pytest.mark.django_db
@pytest.mark.parametrize("fault", ["500", "timeout"])
def test_it_marks_the_bucket_failed_when_kubernetes_fails(sim_world, fault, settings):
    settings.GPUFINOPS_KUBERNETES_TIMEOUT = 2
    healthy = make_cluster(sim_world, name="healthy")
    assert collect_cluster(healthy, sim_world.hours[-2:], now=sim_world.end).ok
    before = rows_without_ids(healthy)
    broken = make_cluster(sim_world, name="broken")
    sim_world.server.set_fault(fault)
    try:
        report = collect_cluster(broken, sim_world.hours[-2:], now=sim_world.end)
    finally:
        sim_world.server.set_fault(None)
    assert len(report.failed) == 2
    # The first bucket's Prometheus round, started before the Kubernetes read, was stopped with it, and the garbage
    # collector, paused while the snapshot is read, is on again.
    assert not [t.name for t in threading.enumerate() if t.name.startswith("prometheus")]
    assert gc.isenabled()
    bucket = Bucket.objects.get(cluster=broken, hour=sim_world.hours[-1])
    assert bucket.status == "failed"
    assert "Kubernetes" in bucket.last_error
    assert bucket.next_attempt_at is not None
    assert rows_without_ids(healthy) == before
    # Retried later, it succeeds.
    assert collect_cluster(broken, sim_world.hours[-2:], now=sim_world.end).ok
    assert rows_without_ids(broken) == before and gc.isenabled()


class _Garbage(BaseHTTPRequestHandler):
    body = b"not json at all"

    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.body)

    do_POST = do_GET  # noqa: N815

    def log_message(self, *args):
        pass


@pytest.mark.django_db
@pytest.mark.parametrize("body", [
    b"not json at all",
    json.dumps({"status": "success", "data": {"resultType": "vector", "result": [{"bogus": 1}]}}).encode(),
])
def test_it_fails_the_bucket_on_a_malformed_prometheus_answer(sim_world, body):
    handler = type("H", (_Garbage,), {"body": body})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cluster = make_cluster(sim_world, name="garbage")
        cluster.prometheus_url = f"http://127.0.0.1:{server.server_port}"
        cluster.save()
        report = collect_cluster(cluster, sim_world.hours[-1:], now=sim_world.end)
    finally:
        server.shutdown()
    assert report.failed
    bucket = Bucket.objects.get(cluster=cluster, hour=sim_world.hours[-1])
    assert bucket.status == "failed" and "Prometheus" in bucket.last_error
    assert not PodHour.objects.filter(cluster=cluster).exists()


# One clean collection of the session's world (sim_world and its hours are fixed for the session), made by the first
# transactional test that needs it: its rows are a pure function of the world, and each collection of 24 hours costs
# seconds of CPU. (A transactional test's rows are gone after it, so the rows are kept, not the cluster.)
_CLEAN_RUNS: dict[int, list[tuple]] = {}


def clean_run(world) -> list[tuple]:  # type: ignore[no-untyped-def]
    """The pod-hours (without ids) one clean `collect_cluster` of the world's hours writes, on a cluster of its own."""
    if id(world) not in _CLEAN_RUNS:
        reference = make_cluster(world, name="reference")
        assert collect_cluster(reference, world.hours, now=world.end).ok
        _CLEAN_RUNS[id(world)] = rows_without_ids(reference)
    return _CLEAN_RUNS[id(world)]


def _collect_proc(world, db_url, *, lease="600"):
    env = {**os.environ, "DATABASE_URL": db_url, "GPUFINOPS_BUCKET_LEASE_SECONDS": lease}
    env.pop("CELERY_BROKER_URL", None)
    return subprocess.Popen(
        [sys.executable, "manage.py", "collect", "--cluster", "shared", "--since", world.start.isoformat(),
         "--until", world.end.isoformat()],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


@pytest.mark.django_db(transaction=True)
def test_it_converges_with_two_workers_at_once(sim_world, test_database_url, postgres_db):
    reference = clean_run(sim_world)
    cluster = make_cluster(sim_world, name="shared")
    procs = [_collect_proc(sim_world, test_database_url) for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err.decode()[-2000:]
    assert Bucket.objects.filter(cluster=cluster, status="ok").count() == 24
    assert rows_without_ids(cluster) == reference


@pytest.mark.django_db(transaction=True)
def test_it_recovers_a_bucket_after_a_worker_is_killed(sim_world, test_database_url, postgres_db):
    reference = clean_run(sim_world)
    cluster = make_cluster(sim_world, name="shared")
    proc = _collect_proc(sim_world, test_database_url, lease="2")
    deadline = time.monotonic() + 300
    while not Bucket.objects.filter(cluster=cluster, status="ok").count() >= 3:
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert Bucket.objects.filter(cluster=cluster, status="ok").count() < 24
    time.sleep(2.5)  # the dead worker's lease runs out
    # Cycle 1 (and 2 if needed): the bucket state, not broker redelivery, drives recovery.
    for _ in range(2):
        collect_cluster(cluster, None, now=sim_world.end)
    assert Bucket.objects.filter(cluster=cluster, status="ok", hour__in=sim_world.hours).count() == 24
    assert rows_without_ids(cluster) == reference
