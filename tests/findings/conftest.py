"""The hand-made world (tests/findings/world.py) behind a real Prometheus, collected through the production path:
nodes and pod observations from a Kubernetes snapshot, each bucket by `apps.usage.services.collect_bucket`, its
findings by `apps.ingest.services.record_findings` (what `collect_cluster` runs after each written bucket)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from apps.findings.models import Finding, FindingHour
from apps.ingest.collectors.prometheus import PrometheusSource
from apps.ingest.services import record_findings, record_side_snapshots
from apps.inventory.models import Cluster
from apps.inventory.services import nodes_sync, set_price
from apps.usage import services as ledger
from tests.findings import world
from tests.harness.prometheus import PrometheusServer, start_prometheus
from tests.harness.services import require_binary

# test_mixed_findings reads the collection of `mixed` that tests/ingest/test_collect_dra.py reads (made once)
from tests.ingest.conftest import mixed_collection, shared_mixed_collection, sim_mixed, sim_mixed_noattr  # noqa: F401


@pytest.fixture(scope="module", params=["plain", "exported"])
def hand_prometheus(request, tmp_path_factory) -> Iterator[tuple[str, PrometheusServer]]:
    """A real Prometheus backfilled with the world's history: pod labels as `pod` (honorLabels true), or renamed
    `exported_pod` beside the exporter's own `pod` (Prometheus Operator's default)."""
    require_binary("promtool")
    require_binary("prometheus")
    path = world.write_openmetrics(tmp_path_factory.mktemp("world") / "dcgm.om", exported=request.param == "exported")
    server = start_prometheus(path)
    try:
        yield request.param, server
    finally:
        server.close()


def make_world_cluster(prometheus_url: str, name: str = "hand") -> Cluster:
    cluster = Cluster.objects.create(name=name, prometheus_url=prometheus_url)
    set_price(world.PRODUCT, world.PRICE, world.H0.date().replace(day=1))
    snap = world.snapshot()
    nodes_sync(cluster, snap.nodes, snap.taken_at)
    ledger.record_pod_observations(cluster, snap)
    return cluster


def collect(cluster: Cluster, hours: list[datetime], *, now: datetime = world.NOW, snapshot: bool = False) -> None:
    """Collect `hours` in the given order as collect_cluster does (one source for the run)."""
    source = PrometheusSource(cluster)
    if snapshot:
        record_side_snapshots(cluster, world.snapshot(now))
    for hour in hours:
        outcome = ledger.collect_bucket(cluster, hour, now=now, source=source, namespace_labels={},
                                        owner="test")
        assert outcome.state == "written", outcome.error
        assert record_findings(cluster, hour, outcome, source) == ""


def table(cluster: Cluster) -> tuple[list, list]:
    """Both findings tables, every column but the ids, in a stable order."""
    skip = {"id"}
    hours = [tuple((f.name, getattr(r, f.attname)) for f in r._meta.fields if f.name not in skip)
             for r in FindingHour.objects.filter(cluster=cluster).order_by("hour", "kind", "subject")]
    runs = [tuple((f.name, getattr(r, f.attname)) for f in r._meta.fields if f.name not in skip)
            for r in Finding.objects.filter(cluster=cluster).order_by("kind", "subject", "start")]
    return hours, runs


@pytest.fixture
def world_path(tmp_path) -> Path:
    return tmp_path


@pytest.fixture
def webhook(settings) -> Iterator:
    from tests.findings.webhook import WebhookReceiver

    # The receiver listens on loopback, which webhooks never reach unless the operator allows the host by name.
    settings.GPUFINOPS_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    receiver = WebhookReceiver()
    yield receiver
    receiver.close()
