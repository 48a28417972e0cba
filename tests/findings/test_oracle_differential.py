"""Findings collected through the real protocols (the simulator's Kubernetes API, a real Prometheus backfilled
with the demo scenario's history) equal the oracle's (`tests.oracle.expected_findings`): every finding with its
start, end, hours, GPU-hours and cost (and the infra loss of unhealthy GPUs), and nothing else."""

from __future__ import annotations

import pytest

from apps.findings.models import Finding
from apps.findings.selectors import listed_q
from tests.ingest.conftest import DEMO_PRICES, priced_day, shared_priced_day, sim_world  # noqa: F401 (the session's)

# No `django_db` mark: the shared priced day opens its transaction before `db` (tests/harness/shared_rows.py).
pytestmark = pytest.mark.services
PRICES = DEMO_PRICES
KINDS = ("unhealthy_gpu", "straggler", "unattributed_activity", "idle_held")


def subject(f: dict) -> tuple[str, str]:
    """The product's subject of an oracle finding (docs/findings.md)."""
    if f["kind"] == "unhealthy_gpu":
        return f["kind"], f"{f['node']}/{f['gpu_uuid']}/{f['reason']}"
    if f["kind"] == "straggler":
        return f["kind"], f"{f['namespace']}/{f['workload']}"
    if f["kind"] == "unattributed_activity":
        return f["kind"], f"{f['node']}/{f['gpu_uuid']}" + (f"/{f['gpu_instance_id']}" if f["gpu_instance_id"] else "")
    return f["kind"], f"{f['namespace']}/{f['pod']}"


def product_key(f: Finding) -> tuple[str, str]:
    return (f.kind, f"{f.namespace}/{f.pod}") if f.kind == "idle_held" else (f.kind, f.subject)


@pytest.fixture
def collected(priced_day):  # noqa: F811
    """The demo's day collected at PRICES, shared with the other oracle tests (tests/ingest/conftest.py)."""
    return priced_day


def test_every_finding_of_the_demo_is_found_with_its_start_end_gpu_hours_and_cost(sim_world, collected):  # noqa: F811
    from tests.oracle import expected_findings

    expected = {}
    for _kind, rows in expected_findings(sim_world.scenario, sim_world.start, sim_world.end).items():
        for f in rows:
            expected[subject(f)] = f
    assert {k for k, _s in expected} <= set(KINDS)
    found = {product_key(f): f for f in Finding.objects.filter(listed_q(), cluster=collected, kind__in=KINDS)}
    assert sorted(found) == sorted(expected)  # every finding, and no false one on healthy steady work
    for key, e in sorted(expected.items()):
        f = found[key]
        assert (f.start, f.end, f.hours) == (e["start"], e["end"], e["hours"]), key
        assert float(f.gpu_hours) == pytest.approx(e["gpu_hours"], abs=1e-3), key
        assert float(f.cost) == pytest.approx(
            e["gpu_hours"] * float(PRICES[e["gpu_model"]]), abs=5e-3), key
        assert (f.node, f.gpu_uuid or None) == (e["node"], e["gpu_uuid"]), key
        if e["kind"] == "unhealthy_gpu":
            assert float(f.allocated_gpu_hours) == pytest.approx(e["detail"]["held_gpu_hours"], abs=1e-3), key
            assert (f.team or None, f.pod or None) == (e["team"], e["pod"]), key
        else:
            who = (f.team, f.namespace, f.workload, f.pod)
            assert tuple(v or None for v in who) == (e["team"], e["namespace"], e["workload"], e["pod"]), key
