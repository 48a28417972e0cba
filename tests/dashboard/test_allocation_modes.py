"""How GPUs were handed out, on the pages: the capacity page's GPU nodes (DRA devices published and held, each HAMi
GPU's free fraction, oversubscription), its node groups' modes, and a workload's pods (a claim with no pod)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from apps.inventory.models import Cluster, Node, NodeGroup
from apps.usage.models import PodHour

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("ops", is_staff=True))
    return client


def _node(cluster: Cluster, name: str, group: str, sharing: str, gpus: int, **fields: object) -> Node:
    now = timezone.now()
    ng, _ = NodeGroup.objects.get_or_create(cluster=cluster, name=group)
    return Node.objects.create(cluster=cluster, name=name, node_group=ng, gpu_model="NVIDIA-H100-80GB-HBM3",
                               physical_gpus=gpus, sharing=sharing, first_seen=now, last_seen=now, **fields)


def test_the_capacity_page_lists_every_gpu_node_with_how_it_hands_gpus_out(staff):
    cluster = Cluster.objects.create(name="prod")
    devices = [{"name": f"gpu-{i}", "type": "gpu", "uuid": f"GPU-{i}"} for i in range(4)]
    devices.append({"name": "gpu-4-mig-1g10gb-19-0", "type": "mig", "uuid": "MIG-0", "parent_uuid": "GPU-4"})
    _node(cluster, "dra-0", "h100-dra", "dra", 5, dra_devices=devices, dra_held=["gpu-0", "gpu-4-mig-1g10gb-19-0"])
    _node(cluster, "hami-0", "l4", "hami", 3, hami_gpus=[{"uuid": u} for u in ("GPU-a", "GPU-b", "GPU-c")],
          hami_shares={"GPU-a": 0.3, "GPU-b": 1.5})
    _node(cluster, "mig-0", "h100-mig", "mig-mixed", 8)
    _node(cluster, "dp-0", "h100-dra", "none", 8)
    body = staff.get("/capacity/").content.decode()
    assert "4 GPU nodes: 1 DRA claim, 1 Device plugin, 1 HAMi fraction, 1 MIG" in body
    assert "4 whole GPU(s) and 1 MIG device(s) published by the DRA driver; 2 held by claims" in body
    assert "GPU 0 70% free; GPU 1 oversubscribed (150% asked); GPU 2 free whole" in body
    assert "MIG, mixed strategy" in body
    csv = staff.get("/capacity/?csv=nodes").content.decode()
    assert csv.splitlines()[0].startswith("Node,") and "HAMi fraction" in csv and len(csv.splitlines()) == 5


def test_a_workloads_pods_say_how_their_gpus_were_handed_out_and_a_claim_has_no_pod(staff):
    cluster = Cluster.objects.create(name="prod")
    hour = timezone.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    common = {"cluster": cluster, "hour": hour, "team": "platform", "namespace": "platform", "node": "dra-1",
              "node_group": "h100-dra", "gpu_model": "NVIDIA-H100-80GB-HBM3", "resources": "", "gpus": 2.0,
              "held_seconds": 3600.0, "allocated_gpu_hours": 2.0, "idle_sm_active": 2.0, "cost": Decimal("8"),
              "idle_cost_sm_active": Decimal("8"), "price": Decimal("4")}
    PodHour.objects.create(pod_uid="claim-uid", pod="", workload="ResourceClaim/reserved", allocation_mode="dra",
                           **common)
    from apps.inventory.services import record_teams
    from apps.usage.services import rollup_day, rollup_hour

    rollup_hour(cluster, hour)
    rollup_day(cluster, hour.date())
    record_teams(cluster, {"platform"}, hour)
    body = staff.get("/workloads/prod/platform/ResourceClaim/reserved/").content.decode()
    assert "(no pod: the claim holds its devices)" in body and "DRA claim" in body
    listing = staff.get("/workloads/").content.decode()
    assert "ResourceClaim/reserved" in listing and "DRA claim" in listing
