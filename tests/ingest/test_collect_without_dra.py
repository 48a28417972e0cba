"""A cluster without DRA or HAMi (the `demo` scenario, no `resource.k8s.io` served) collects as it did before they
were counted: the group is asked of discovery only, no warning is logged, nothing DRA or HAMi is recorded, every
pod-hour keeps a device-plugin allocation mode, and the ledger still equals the oracle (test_collect_differential)."""

from __future__ import annotations

import logging

import pytest

from apps.ingest.collectors.dra import served_version
from apps.ingest.collectors.kubernetes import api_client_for, read_snapshot
from apps.ingest.services import collect_cluster
from apps.inventory.models import Node
from apps.usage.models import ClaimObservation, NodeHour, PodHour, PodObservation
from tests.ingest.conftest import make_cluster

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def test_a_cluster_without_dra_collects_as_before(sim_world, caplog):
    cluster = make_cluster(sim_world, name="no-dra")
    assert served_version(api_client_for(cluster)) == ""
    assert read_snapshot(cluster).dra is None
    with caplog.at_level(logging.WARNING):
        report = collect_cluster(cluster, sim_world.hours[-3:], now=sim_world.end)
    assert report.ok, report.failed
    noisy = [r.getMessage() for r in caplog.records
             if any(w in r.getMessage() for w in ("resource.k8s.io", "DRA", "claim", "HAMi", "hami"))]
    assert noisy == []
    assert not ClaimObservation.objects.filter(cluster=cluster).exists()
    assert not Node.objects.filter(cluster=cluster, sharing__in=("dra", "hami")).exists()
    assert not Node.objects.filter(cluster=cluster).exclude(dra_devices=[]).exists()
    assert not Node.objects.filter(cluster=cluster).exclude(hami_gpus=[]).exists()
    assert not PodObservation.objects.filter(cluster=cluster).exclude(holds=[]).exists()
    modes = set(PodHour.objects.filter(cluster=cluster).values_list("allocation_mode", flat=True))
    assert modes and modes <= {"device_plugin", "time_slice", "mig"}
    assert not NodeHour.objects.filter(cluster=cluster, allocation_mode__in=("dra", "hami")).exists()
    assert not PodHour.objects.filter(cluster=cluster, pod="").exists()
