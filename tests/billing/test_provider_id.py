"""Nodes' `spec.providerID` is collected from the Kubernetes API and kept on the node: the bill is matched on it."""

from __future__ import annotations

import pytest

from apps.ingest.services import record_snapshot
from apps.inventory.models import Cluster, Node
from devtools.simulator.model import provider_id
from tests.harness.kube_world import read_world_snapshot

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def test_every_node_keeps_the_provider_id_the_api_serves(kube_world):
    cluster = Cluster.objects.create(name="sim-demo", source=Cluster.Source.SIMULATOR)
    record_snapshot(cluster, read_world_snapshot(kube_world, cluster))
    ids = dict(Node.objects.filter(cluster=cluster).values_list("name", "provider_id"))
    assert ids, "the world has GPU nodes"
    # The simulator's node objects carry an AWS-shaped `spec.providerID` (devtools/simulator/model.provider_id).
    assert ids == {name: provider_id(kube_world.scenario.cluster_name, name) for name in ids}
    assert all(pid.startswith("aws:///us-east-1a/i-") for pid in ids.values()) and len(set(ids.values())) == len(ids)
