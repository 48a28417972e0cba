"""An exporter without NODE_NAME (dcgm-exporter#58, #68, #188): every DCGM series' `Hostname` is the exporter's
own pod name, not the node's. GPUs are matched by UUID and nodes come from Kubernetes, so unhealthy-GPU findings
still carry the holder's team, pod, workload and cost, equal to the oracle's (`tests.oracle.expected_findings`)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from apps.findings.models import Finding
from apps.findings.selectors import listed_q
from apps.ingest.services import collect_cluster
from apps.inventory.services import set_price
from tests.findings.test_oracle_differential import PRICES, subject
from tests.ingest.conftest import make_cluster, sim_world_no_node_name  # noqa: F401 (the session's world)

pytestmark = [pytest.mark.services, pytest.mark.django_db]


def test_unhealthy_gpus_carry_the_holder_and_cost_though_hostname_is_the_exporter_pod(sim_world_no_node_name):  # noqa: F811
    from tests.oracle import expected_findings

    world = sim_world_no_node_name
    answer = world.prometheus.query("DCGM_FI_DEV_FB_USED", world.end - timedelta(minutes=5))
    hostnames = {r["metric"]["Hostname"] for r in answer}
    nodes = {n.name for n in world.scenario.nodes}
    assert hostnames and not hostnames & nodes  # the shape under test: no series names its node
    assert all(h.startswith("nvidia-dcgm-exporter-") for h in hostnames)

    for model, price in PRICES.items():
        set_price(model, price, world.start.date().replace(day=1))
    cluster = make_cluster(world, name="sim-demo-no-node-name")
    report = collect_cluster(cluster, world.hours, now=world.end)
    assert report.ok and not report.findings_failed, (report.failed, report.findings_failed)

    expected = {subject(f): f for f in expected_findings(world.scenario, world.start, world.end)["unhealthy_gpu"]}
    held = [f for f in expected.values() if f["team"]]
    assert held, "the demo has unhealthy GPUs held by a team"
    found = {(f.kind, f.subject): f for f in Finding.objects.filter(listed_q(), cluster=cluster, kind="unhealthy_gpu")}
    # Subjects name the Kubernetes node, never the exporter pod.
    assert sorted(found) == sorted(expected), (sorted(set(found) - set(expected)), sorted(set(expected) - set(found)))
    for key, e in sorted(expected.items()):
        f = found[key]
        assert (f.team or None, f.pod or None, f.node) == (e["team"], e["pod"], e["node"]), key
        assert (f.workload or None) == e.get("workload"), key
        assert float(f.cost) == pytest.approx(e["gpu_hours"] * float(PRICES[e["gpu_model"]]), abs=5e-3), key
        assert float(f.allocated_gpu_hours) == pytest.approx(e["detail"]["held_gpu_hours"], abs=1e-3), key
        if e["team"]:
            assert f.allocated_cost > Decimal(0), key  # infra loss priced: the holder's charge for the GPU
