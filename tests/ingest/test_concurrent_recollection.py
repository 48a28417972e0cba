"""Two days re-collected three times at once — by two real Celery workers and a `collect` command — leave every
ledger table byte-identical to one clean run (issue 10). Two days, not the week this began with: the writers contend
per bucket, and 48 buckets contested by three writers interleave them as a week's 168 did, for two sevenths of what
was the suite's longest test (four collections of a week, about 400 CPU-seconds). PostgreSQL, Redis, real worker
processes; the simulated cluster's Kubernetes API and Prometheus API (the latter checked against a real Prometheus in
tests/devtools) answer all of them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from apps.ingest.services import collect_cluster
from apps.ingest.tasks import collect_cluster_task
from apps.inventory.models import Cluster
from apps.usage.models import (
    Bucket,
    CapacityDay,
    CapacityHour,
    NodeHour,
    PodHour,
    UsageDay,
    UsageHour,
    WorkloadDay,
    WorkloadWeek,
)
from tests.ingest.conftest import END

pytestmark = [pytest.mark.services, pytest.mark.slow]
DAYS = 2
TABLES = (PodHour, NodeHour, UsageHour, UsageDay, WorkloadDay, WorkloadWeek, CapacityHour, CapacityDay)


@pytest.fixture(scope="module")
def week_world(tmp_path_factory):
    from devtools.simulator.k8s_api import start_server
    from devtools.simulator.prometheus_api import start_prometheus
    from devtools.simulator.scenarios import build_scenario

    scenario = build_scenario("demo", seed=0, end=END, days=DAYS + 1, with_dra=False)
    kube = start_server(scenario, host="127.0.0.1", port=0)
    kube.set_time(END)
    prometheus = start_prometheus(scenario, host="127.0.0.1", port=0)
    kubeconfig = tmp_path_factory.mktemp("week") / "kubeconfig"
    kube.write_kubeconfig(str(kubeconfig))
    try:
        yield kube, prometheus, kubeconfig
    finally:
        kube.stop()
        prometheus.stop()


def _tables(cluster: Cluster) -> list[list[tuple]]:
    out = []
    for model in TABLES:
        fields = [f.attname for f in model._meta.fields if f.attname not in ("id", "cluster_id")]
        out.append(list(model.objects.filter(cluster=cluster).order_by(*fields).values_list(*fields)))
    return out


@pytest.mark.django_db(transaction=True)
def test_days_recollected_three_times_at_once_equal_one_clean_run(
    week_world, celery_worker_factory, test_database_url, postgres_db
):
    _kube, prometheus, kubeconfig = week_world
    since, until = END - timedelta(days=DAYS), END
    hours = [since + timedelta(hours=h) for h in range(DAYS * 24)]

    def make(name: str) -> Cluster:
        return Cluster.objects.create(name=name, prometheus_url=prometheus.url, kubeconfig_path=str(kubeconfig))

    busy = make("busy")
    assert collect_cluster(busy, hours, now=until).ok  # one clean run: the days exist
    clean = _tables(busy)  # what one clean run wrote; now re-collect them three times at once

    workers = [celery_worker_factory() for _ in range(2)]
    tasks = [collect_cluster_task.delay(busy.pk, since.isoformat(), until.isoformat()) for _ in workers]
    env = {**os.environ, "DATABASE_URL": test_database_url}
    env.pop("CELERY_BROKER_URL", None)
    command = subprocess.Popen(
        [sys.executable, "manage.py", "collect", "--cluster", "busy", "--since", since.isoformat(), "--until",
         until.isoformat()],
        cwd=Path(__file__).resolve().parents[2], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    started = time.monotonic()
    results = [t.get(timeout=1200) for t in tasks]
    out, err = command.communicate(timeout=1200)
    assert command.returncode == 0, err[-2000:]
    assert all(not r["failed"] and not r["degraded"] for r in results), results
    # Together they rewrote every hour at least once (buckets another writer held were skipped, not lost).
    written = sum(len(r["written"]) for r in results)
    assert written > 0 and time.monotonic() - started < 1200
    assert Bucket.objects.filter(cluster=busy, status="ok", state="final").count() == DAYS * 24
    assert _tables(busy) == clean
