"""Findings about GPUs handed out by DRA claims and HAMi fractions, collected through the real protocols (the
simulator's Kubernetes API over HTTP, a real Prometheus backfilled with its history) as the collector runs in
production (a read every 5 minutes, each hour's bucket once it ended), equal the oracle's: the idle claim and the
oversubscribed HAMi GPU of `mixed`, the DRA nodes without attribution of `mixed-noattr`; and no zero-allocatable or
unattributed-activity finding on a DRA or HAMi node. The collection is the one tests/ingest/test_collect_dra.py
checks the ledger of (tests/ingest/conftest.py, `mixed_collection`: the last 14 hours of `mixed` and 6 of
`mixed-noattr`, priced at `MIXED_PRICES`)."""

from __future__ import annotations

import pytest

from apps.findings.models import Finding
from apps.findings.selectors import listed_q
from tests.ingest.conftest import MIXED_PRICES as PRICES

# No `django_db` mark: the shared collection opens its transaction before `db` (tests/harness/shared_rows.py).
pytestmark = pytest.mark.services

KINDS = ("idle_claim", "oversubscribed_gpu", "missing_attribution")


def subject(f: dict) -> tuple[str, str]:
    if f["kind"] == "idle_claim":
        return f["kind"], f"{f['namespace']}/{f['workload'].removeprefix('ResourceClaim/')}"
    if f["kind"] == "oversubscribed_gpu":
        return f["kind"], f"{f['node']}/{f['gpu_uuid']}"
    return f["kind"], f["node"]


def compare(collected) -> dict:  # type: ignore[no-untyped-def]
    from tests.oracle import expected_findings

    world, cluster = collected.world, collected.cluster
    truth = expected_findings(world.scenario, *collected.window)
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


def test_the_idle_claim_and_the_oversubscribed_gpu_of_mixed(mixed_collection):
    found = compare(mixed_collection["mixed"])
    assert {k for k, _s in found} == {"idle_claim", "oversubscribed_gpu"}  # the cases are there
    [claim] = [f for (k, _s), f in found.items() if k == "idle_claim"]
    assert claim.workload == "ResourceClaim/reserved-h100-pair" and claim.detail["claim"] == "reserved-h100-pair"
    [over] = [f for (k, _s), f in found.items() if k == "oversubscribed_gpu"]
    assert over.detail["max_share_sum"] == pytest.approx(1.5)
    assert {t["pod"] for t in over.detail["tenants"]} == {"tenant-a-0", "tenant-b-0", "tenant-c-0"}


def test_dra_nodes_without_attribution_are_flagged_with_the_fix(mixed_collection):
    found = compare(mixed_collection["noattr"])
    missing = [f for (k, _s), f in found.items() if k == "missing_attribution"]
    assert {f.node for f in missing} == {"dra-h100-0", "dra-h100-1", "dra-mig-0"}
    assert all("KUBERNETES_ENABLE_DRA=true" in f.detail["fix"] and f.team == "" for f in missing)
