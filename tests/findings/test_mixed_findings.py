"""Findings about GPUs handed out by DRA claims and HAMi fractions, collected through the real protocols (the
simulator's Kubernetes API over HTTP, a real Prometheus backfilled with its history) as the collector runs in
production (a read every 5 minutes, each hour's bucket once it ended), equal the oracle's: the idle claim and the
oversubscribed HAMi GPU of `mixed`, the DRA nodes without attribution of `mixed-noattr`; and no zero-allocatable or
unattributed-activity finding on a DRA or HAMi node."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from decimal import Decimal

import pytest

from apps.findings.models import Finding
from apps.findings.selectors import listed_q
from apps.ingest.collectors.kubernetes import read_snapshot
from apps.ingest.collectors.prometheus import PrometheusSource
from apps.ingest.services import record_findings, record_snapshot
from apps.inventory.services import set_price
from apps.usage import services as ledger
from tests.ingest.conftest import make_cluster, mixed_world

pytestmark = [pytest.mark.django_db, pytest.mark.services]

HOURS = 14  # the last hours: the idle claim's whole run and most of the oversubscription's are in them
SNAPSHOT = timedelta(minutes=5)
KINDS = ("idle_claim", "oversubscribed_gpu", "missing_attribution")
PRICES = {"NVIDIA-H100-80GB-HBM3": Decimal("4.00"), "NVIDIA-A100-SXM4-80GB": Decimal("2.50"),
          "NVIDIA-L4": Decimal("0.80")}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory, django_db_setup, django_db_blocker):
    yield from mixed_world(tmp_path_factory, "mixed")


@pytest.fixture(scope="module")
def noattr(tmp_path_factory, django_db_setup, django_db_blocker):
    yield from mixed_world(tmp_path_factory, "mixed-noattr")


def collect(world, name: str):  # type: ignore[no-untyped-def]
    """Reads every 5 minutes through each hour, then the hour's bucket and its findings."""
    for model, price in PRICES.items():
        set_price(model, price, (world.end - timedelta(days=3)).date())
    cluster = make_cluster(world, name=name)
    source = PrometheusSource(cluster)
    hours = world.hours[-HOURS:]
    at = hours[0]
    for hour in hours:
        snap = None
        while at <= hour + timedelta(hours=1):
            world.server.set_time(at)
            snap = dataclasses.replace(read_snapshot(cluster), taken_at=at)
            record_snapshot(cluster, snap)
            at += SNAPSHOT
        at -= SNAPSHOT
        outcome = ledger.collect_bucket(cluster, hour, now=world.end, source=source,
                                        namespace_labels=snap.namespace_labels, owner="test")
        assert outcome.state == "written", outcome.error
        assert record_findings(cluster, hour, outcome, source) == ""
    world.server.set_time(world.end)
    return cluster, hours[0], hours[-1] + timedelta(hours=1)


def subject(f: dict) -> tuple[str, str]:
    if f["kind"] == "idle_claim":
        return f["kind"], f"{f['namespace']}/{f['workload'].removeprefix('ResourceClaim/')}"
    if f["kind"] == "oversubscribed_gpu":
        return f["kind"], f"{f['node']}/{f['gpu_uuid']}"
    return f["kind"], f["node"]


def compare(world, cluster, start, end) -> dict:  # type: ignore[no-untyped-def]
    from tests.oracle import expected_findings

    truth = expected_findings(world.scenario, start, end)
    expected = {subject(f): f for kind in KINDS for f in truth[kind]}
    found = {(f.kind, f.subject): f for f in Finding.objects.filter(listed_q(), cluster=cluster, kind__in=KINDS)}
    assert sorted(found) == sorted(expected)
    for key, e in expected.items():
        f = found[key]
        assert (f.start, f.end, f.hours) == (e["start"], e["end"], e["hours"]), key
        assert float(f.gpu_hours) == pytest.approx(e["gpu_hours"], abs=1e-3), key
        assert float(f.cost) == pytest.approx(e["gpu_hours"] * float(PRICES[e["gpu_model"]]), abs=5e-3), key
        assert (f.team or None, f.namespace or None, f.workload or None, f.pod or None, f.node) == (
            e["team"], e["namespace"], e["workload"], e["pod"], e["node"]), key
    dra_or_hami = {n.name for n in world.scenario.nodes if n.kind in ("dra", "hami")}
    noisy = Finding.objects.filter(cluster=cluster, kind__in=("zero_allocatable_node", "unattributed_activity"),
                                   node__in=sorted(dra_or_hami))
    assert list(noisy.values_list("kind", "node")) == []
    return found


def test_the_idle_claim_and_the_oversubscribed_gpu_of_mixed(mixed):
    cluster, start, end = collect(mixed, "sim-mixed")
    found = compare(mixed, cluster, start, end)
    assert {k for k, _s in found} == {"idle_claim", "oversubscribed_gpu"}  # the cases are there
    [claim] = [f for (k, _s), f in found.items() if k == "idle_claim"]
    assert claim.workload == "ResourceClaim/reserved-h100-pair" and claim.detail["claim"] == "reserved-h100-pair"
    [over] = [f for (k, _s), f in found.items() if k == "oversubscribed_gpu"]
    assert over.detail["max_share_sum"] == pytest.approx(1.5)
    assert {t["pod"] for t in over.detail["tenants"]} == {"tenant-a-0", "tenant-b-0", "tenant-c-0"}


def test_dra_nodes_without_attribution_are_flagged_with_the_fix(noattr):
    cluster, start, end = collect(noattr, "sim-noattr")
    found = compare(noattr, cluster, start, end)
    missing = [f for (k, _s), f in found.items() if k == "missing_attribution"]
    assert {f.node for f in missing} == {"dra-h100-0", "dra-h100-1", "dra-mig-0"}
    assert all("KUBERNETES_ENABLE_DRA=true" in f.detail["fix"] and f.team == "" for f in missing)
