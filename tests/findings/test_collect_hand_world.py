"""Findings computed at collection from a real Prometheus (hand-made history, tests/findings/world.py): every
finding with its start, end, GPU-hours and cost; nothing on healthy steady work; re-collecting changes nothing;
collecting out of order ends in the same tables."""

from __future__ import annotations

import pytest

from apps.findings.models import Finding, FindingHour
from apps.findings.services import runs_from_rows
from tests.findings import world
from tests.findings.conftest import collect, make_world_cluster, table

pytestmark = [pytest.mark.services, pytest.mark.django_db]


def _found(cluster) -> dict:
    return {(f.kind, f.subject): f for f in Finding.objects.filter(cluster=cluster)}


def test_every_finding_of_the_hand_made_world_is_found_with_its_start_end_hours_and_cost(hand_prometheus):
    scheme, prometheus = hand_prometheus
    cluster = make_world_cluster(prometheus.url)
    collect(cluster, world.HOURS)
    found = _found(cluster)
    assert set(found) == set(world.EXPECTED), scheme
    for key, (start, end, hours, gpu_hours, cost, team, held) in world.EXPECTED.items():
        f = found[key]
        assert (f.start, f.end, f.hours, f.team) == (start, end, hours, team), key
        assert float(f.gpu_hours) == pytest.approx(gpu_hours, abs=1e-6), key
        assert float(f.cost) == pytest.approx(cost, abs=4e-6), key
        assert float(f.allocated_gpu_hours) == pytest.approx(held, abs=1e-6), key
    straggler = found[("straggler", "ml/PyTorchJob/llm")]
    assert straggler.detail["slowest_gpu"] == "GPU-a7" and straggler.pod == "train-1"
    assert straggler.detail["ratio"] == pytest.approx(1 / 3, abs=1e-6)
    xid = found[("unhealthy_gpu", "h100-b/GPU-b2/xid")]
    assert xid.detail["tags"] == {"xid": 3, "xid:79": 3} and xid.pod == "busy-0"
    hot = found[("unhealthy_gpu", "h100-b/GPU-b3/throttle")].detail
    assert hot["reasons"] == ["hw_slowdown", "sw_thermal"] and hot["throttled_seconds"] == 3600
    gone = found[("unhealthy_gpu", "h100-b/GPU-b7/vanished")]
    assert (gone.pod, gone.detail["tags"]) == ("van-0", {"vanished": 2})
    assert found[("idle_held", "uid-nb-0")].detail["fb_used_mib"] == 12000


def test_recollecting_leaves_the_tables_identical_and_order_does_not_matter(hand_prometheus):
    _scheme, prometheus = hand_prometheus
    cluster = make_world_cluster(prometheus.url)
    collect(cluster, world.HOURS)
    first = table(cluster)
    collect(cluster, [world.HOURS[2], world.HOURS[0]])
    assert table(cluster) == first
    # Out of order (a retried bucket): the same findings, but for a vanished GPU, which is followed from the hour
    # it stopped reporting onwards (each hour asks whether the one before found it gone; docs/findings.md).
    other = make_world_cluster(prometheus.url, name="hand-reversed")
    collect(other, [world.HOURS[3], world.HOURS[1], world.HOURS[0], world.HOURS[2]])

    def runs(rows):
        return [tuple(kv for kv in row if kv[0] != "cluster") for row in rows if ("subject", VANISHED) not in row]

    assert runs(table(other)[1]) == runs(first[1])


VANISHED = "h100-b/GPU-b7/vanished"


def test_every_run_is_the_exact_sum_of_its_hours(hand_prometheus):
    _scheme, prometheus = hand_prometheus
    cluster = make_world_cluster(prometheus.url)
    collect(cluster, [world.HOURS[1], world.HOURS[3], world.HOURS[0], world.HOURS[2], world.HOURS[1]])
    for f in Finding.objects.filter(cluster=cluster):
        rows = list(FindingHour.objects.filter(cluster=cluster, kind=f.kind, subject=f.subject).order_by("hour"))
        (run,) = [r for r in runs_from_rows(rows) if r["start"] == f.start]
        for name in ("last_hour", "hours", "gpu_hours", "cost", "allocated_gpu_hours", "allocated_cost", "team"):
            assert getattr(f, name) == run[name], (f.kind, f.subject, name)
        assert f.detail == run["detail"]
