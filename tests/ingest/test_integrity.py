"""The ledger is never silently wrong (issue 10), against the real sources: a wiped, stopped or silent
Prometheus, an exporter without SM activity, concurrent writers on SQLite."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Sum
from rest_framework.test import APIClient

from apps.ingest.services import collect_cluster
from apps.usage.models import Bucket, NodeHour, PodHour, UsageHour
from apps.usage.selectors import clusters_missing_signal
from tests.harness.prometheus import start_prometheus
from tests.ingest.conftest import DAYS, make_cluster

pytestmark = pytest.mark.services


def _ledger(cluster) -> list:
    """Every ledger row of the cluster, without ids: what must not change."""
    out = []
    for model in (PodHour, NodeHour, UsageHour):
        fields = [f.attname for f in model._meta.fields if f.attname not in ("id", "cluster_id")]
        out.append(list(model.objects.filter(cluster=cluster).order_by(*fields).values_list(*fields)))
    return out


def _staff_client():
    from django.contrib.auth.models import User

    client = APIClient()
    client.force_authenticate(User.objects.get_or_create(username="ops", is_staff=True)[0])
    return client


@pytest.mark.django_db
def test_a_wiped_prometheus_keeps_the_stored_hours_and_the_command_fails(sim_world):
    hours = sim_world.hours[-3:]
    cluster = make_cluster(sim_world, name="wiped")
    assert collect_cluster(cluster, hours, now=sim_world.end).ok
    before = _ledger(cluster)
    empty = start_prometheus(None)  # answers `success` with no series at all
    try:
        cluster.prometheus_url = empty.url
        cluster.save()
        since, until = hours[0].isoformat(), (hours[-1] + timedelta(hours=1)).isoformat()
        with pytest.raises(CommandError, match="kept"):
            call_command("collect", "--cluster", "wiped", "--since", since, "--until", until)
        assert _ledger(cluster) == before
        buckets = Bucket.objects.filter(cluster=cluster, hour__in=hours)
        assert {b.status for b in buckets} == {"degraded_source"}
        assert all("no DCGM series" in b.last_error for b in buckets)
        assert all(b.next_attempt_at is not None for b in buckets)  # retried with backoff, not every cycle
        day = hours[0].date().isoformat()  # the three hours may span two UTC days
        status = _staff_client().get("/api/v1/data-status/", {"start": day, "cluster": "wiped"}).json()
        assert sum(r["counts"]["degraded_source"] for r in status["results"]) == 3
        # The operator's explicit choice replaces them (everything now unmeasured).
        call_command("collect", "--cluster", "wiped", "--since", since, "--until", until, "--accept-loss")
        assert PodHour.objects.filter(cluster=cluster).aggregate(w=Sum("working_sm_active"))["w"] == 0
        assert {b.status for b in Bucket.objects.filter(cluster=cluster, hour__in=hours)} == {"source_missing"}
    finally:
        empty.close()


@pytest.mark.django_db
def test_a_stopped_prometheus_stops_the_clusters_run_after_one_bucket(sim_world):
    cluster = make_cluster(sim_world, name="stopped")
    sim_world.prometheus.stop()
    try:
        report = collect_cluster(cluster, sim_world.hours[-6:], now=sim_world.end)
    finally:
        sim_world.prometheus.start()
    assert len(report.failed) == 1 and len(report.not_attempted) == 5 and not report.ok
    assert Bucket.objects.filter(cluster=cluster).count() == 1  # the other hours were never tried


@pytest.mark.django_db
def test_a_prometheus_that_never_answers_costs_one_timeout_per_run(sim_world, settings):
    """It accepts connections and says nothing: the first bucket times out and the run stops there, instead
    of every hour of a catch-up waiting out the same timeout."""
    settings.GPUFINOPS_PROMETHEUS_TIMEOUT = 1
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        silent.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(silent.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        cluster = make_cluster(sim_world, name="silent")
        cluster.prometheus_url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        cluster.save()
        started = time.monotonic()
        report = collect_cluster(cluster, sim_world.hours, now=sim_world.end)
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        silent.close()
    assert len(report.failed) == 1 and len(report.not_attempted) == len(sim_world.hours) - 1
    assert "Prometheus" in next(iter(report.failed.values()))
    assert elapsed < 30  # one bucket's timeouts (with one retry), not 24 of them


@pytest.mark.django_db
def test_an_exporter_without_sm_active_leaves_it_unmeasured_never_relabelled(sim_world, tmp_path):
    """dcgm-exporter's stock lists (default-counters.csv, dcp-metrics-included.csv, the GPU Operator's) leave
    DCGM_FI_PROF_SM_ACTIVE commented out (the simulator's `demo-stock-counters`): sm_active hours are unmeasured
    there, GR engine and tensor activity keep their own values, and the finding and the views name the cluster
    and the fix: the metrics-list line, for the chart's customMetrics and for the Operator's ConfigMap."""
    from apps.findings.models import Finding
    from tests.ingest.conftest import _export

    hours = sim_world.hours[-2:]
    stock = tmp_path / "stock.om"
    _export("demo-stock-counters", hours[0] - timedelta(hours=1), sim_world.end, stock)
    assert "DCGM_FI_PROF_SM_ACTIVE" not in stock.read_text() and "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{" in stock.read_text()
    prom = start_prometheus(stock)
    try:
        cluster = make_cluster(sim_world, name="stock-exporter")
        cluster.prometheus_url = prom.url
        cluster.save()
        assert collect_cluster(cluster, hours, now=sim_world.end).ok
    finally:
        prom.close()
    rows = PodHour.objects.filter(cluster=cluster).aggregate(
        a=Sum("allocated_gpu_hours"), u=Sum("unmeasured_sm_active"), w=Sum("working_sm_active"),
        g=Sum("working_gr_engine_active"), gu=Sum("unmeasured_gr_engine_active"),
        t=Sum("working_tensor_active"), tu=Sum("unmeasured_tensor_active"),
    )  # fmt: skip
    assert rows["a"] > 0 and rows["w"] == 0 and rows["u"] == pytest.approx(rows["a"])
    assert rows["g"] > 0 and rows["t"] > 0  # measured under the signals the stock list has
    assert rows["gu"] < rows["a"] and rows["tu"] < rows["a"]
    assert {tuple(b.signals) for b in Bucket.objects.filter(cluster=cluster)} == {
        ("gpu_util", "gr_engine_active", "tensor_active")
    }
    client = _staff_client()
    usage = client.get("/api/v1/usage/", {"start": hours[0].isoformat(), "end": sim_world.end.isoformat(),
                                          "cluster": "stock-exporter", "group_by": "cluster"}).json()
    assert usage["signal"] == "sm_active" and usage["totals"]["working_gpu_hours"] == 0
    missing = [m for m in clusters_missing_signal(visible_teams=None, within=timedelta(days=DAYS + 1))
               if m.cluster == "stock-exporter"]
    assert missing and missing[0].metric == "DCGM_FI_PROF_SM_ACTIVE"
    from django.contrib.auth.models import User
    from django.test import Client

    browser = Client()
    browser.force_login(User.objects.get(username="ops"))
    page = browser.get("/data-status/").content.decode()
    line = "DCGM_FI_PROF_SM_ACTIVE, gauge, The ratio of cycles an SM has at least 1 warp assigned (0 to 1)."
    assert "stock-exporter" in page and line in page
    assert "customMetrics" in page and "dcgmExporter.config.name" in page and "dcgm-metrics.csv" in page
    finding = Finding.objects.get(cluster=cluster, kind="missing_signal")
    assert finding.detail["line"] == line and "customMetrics" in finding.detail["fix"]
    assert "dcgm-metrics.csv" in finding.detail["fix"] and "dcp-metrics" not in finding.detail["fix"]


def test_two_collect_processes_on_sqlite_wait_for_each_other(sim_world, tmp_path):
    """The embedded default (SQLite): a second writer waits for the first instead of crashing with
    `database is locked`."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'embedded.sqlite3'}"}
    env.pop("CELERY_BROKER_URL", None)
    root = Path(__file__).resolve().parents[2]

    def manage(*args: str, **kwargs) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "manage.py", *args], cwd=root, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, **kwargs)

    for args in (("migrate", "--noinput", "-v", "0"),
                 ("add_cluster", "embedded", "--prometheus-url", sim_world.prometheus.url, "--kubeconfig",
                  str(sim_world.kubeconfig))):
        proc = manage(*args)
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
    window = ("--cluster", "embedded", "--since", sim_world.hours[-6].isoformat(), "--until", sim_world.end.isoformat())
    procs = [manage("collect", *window) for _ in range(2)]
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
        assert "database is locked" not in err
    import sqlite3

    with sqlite3.connect(tmp_path / "embedded.sqlite3") as db:
        ok = db.execute("SELECT count(*) FROM usage_bucket WHERE status = 'ok' AND state = 'final'").fetchone()[0]
    assert ok == 6
