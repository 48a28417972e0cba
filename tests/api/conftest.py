"""A small ledger with known numbers, and one user per kind of caller.

Pod and node rows are written directly with the ORM (not through the collector) and every rollup is built
from them by the ledger's own rollups, so every expected figure in these tests can be checked by hand:

* cluster ``alpha``: team ``vision`` (alice's) and ``unassigned``; cluster ``beta``: team ``nlp`` (bob's).
* 2026-11-23, hours 00 and 01, per hour and group (``sm_active``):

  ============  =========  =========  =======  ====  ==========  ====  =========
  team          namespace  allocated  working  idle  unmeasured  cost  idle_cost  (one pod, one workload each)
  ============  =========  =========  =======  ====  ==========  ====  =========
  vision        train      10         4        5     1           20    10
  vision        serve      2          1        1     0           4     2
  nlp (beta)    llm        8          2        6     0           24    18
  unassigned    misc       1          0        0     1           2     0
  ============  =========  =========  =======  ====  ==========  ====  =========

  Under ``gpu_util`` the working and idle figures swap where they differ (see ``_usage``).
* Capacity per hour: alpha 16 GPU-hours (unallocated 3, unavailable 1; $32), beta 8 (unallocated 0; $24).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from apps.accounts.selectors import FINANCE_GROUP
from apps.accounts.services import create_api_token
from apps.inventory.models import Cluster, NamespaceTeam, NodeGroup, Team
from apps.inventory.services import record_teams
from apps.usage.activity import SIGNALS
from apps.usage.models import Bucket, NodeHour, PodHour
from apps.usage.services import rollup_day, rollup_hour
from tests.harness.shared_rows import WORLD_FIXTURES

DAY = datetime(2026, 11, 23, tzinfo=UTC)
H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-80GB"
SUM_FIELDS = [
    "allocated_gpu_hours",
    "cost",
    *[f"{kind}_{s}" for s in SIGNALS for kind in ("working", "idle", "unmeasured", "idle_cost")],
]


def _signal_fields(working: float, idle: float, unmeasured: float, price: float, gpu_util: tuple[float, float]):
    fields = {}
    for s in SIGNALS:
        w, i = gpu_util if s == "gpu_util" else (working, idle)
        fields.update({f"working_{s}": w, f"idle_{s}": i, f"unmeasured_{s}": unmeasured, f"idle_cost_{s}": i * price})
    return fields


def _pod(cluster, hour, team, namespace, workload, node_group, gpu_model, allocated, working, idle, unmeasured, price):
    """One pod's row of the table in the module docstring; under gpu_util the activity reads higher
    (working + idle, split 3:1)."""
    measured = working + idle
    name = f"{workload.split('/')[1]}-0"
    PodHour.objects.create(
        cluster=cluster, hour=hour, namespace=namespace, pod=name, pod_uid=f"uid-{namespace}-{name}",
        workload=workload, team=team, node=f"{cluster.name}-node-1", node_group=node_group, gpu_model=gpu_model,
        resources=f"nvidia.com/gpu={allocated:g}", gpus=allocated, held_seconds=3600, price=price,
        allocated_gpu_hours=allocated, cost=allocated * price,
        **_signal_fields(working, idle, unmeasured, price, (measured * 0.75, measured * 0.25)),
    )  # fmt: skip


def _node(cluster, hour, node_group, gpu_model, capacity, allocated, unavailable, capacity_cost, unallocated_cost):
    NodeHour.objects.create(
        cluster=cluster, hour=hour, node=f"{cluster.name}-node-1", node_group=node_group, gpu_model=gpu_model,
        physical_gpus=int(capacity), capacity_gpu_hours=capacity, allocated_gpu_hours=allocated,
        unallocated_gpu_hours=capacity - allocated, unavailable_gpu_hours=unavailable, capacity_cost=capacity_cost,
        unallocated_cost=unallocated_cost,
    )  # fmt: skip


def rebuild_days() -> None:
    """Every rollup from the pod and node rows, by the ledger's own rollups (as its write path does), and the
    findings those rows determine (idle allocations), by the findings' own rebuild from the ledger."""
    from apps.findings.services import rebuild_from_ledger

    for cluster in Cluster.objects.all():
        hours = set(PodHour.objects.filter(cluster=cluster).values_list("hour", flat=True))
        hours |= set(NodeHour.objects.filter(cluster=cluster).values_list("hour", flat=True))
        for hour in sorted(hours):
            rollup_hour(cluster, hour)
        for day in {h.date() for h in hours}:
            rollup_day(cluster, day)
        rebuild_from_ledger(cluster, hours)


def pod_hour(cluster, hour, pod, team, *, working, idle, unmeasured=0.0, gpus=4.0, price=2.0, namespace=None):
    """One PodHour row holding ``gpus`` for the whole hour; activity given as GPU-hours."""
    allocated = working + idle + unmeasured
    return PodHour.objects.create(
        cluster=cluster,
        hour=hour,
        namespace=namespace or f"{team}-ns",
        pod=pod,
        pod_uid=f"uid-{cluster.name}-{pod}",
        workload=f"Pod/{pod}",
        team=team,
        node=f"{cluster.name}-node-1",
        node_group="h100",
        gpu_model=H100,
        resources=f"nvidia.com/gpu={gpus:g}",
        gpus=gpus,
        held_seconds=3600,
        price=price,
        allocated_gpu_hours=allocated,
        cost=allocated * price,
        **_signal_fields(working, idle, unmeasured, price, (working, idle)),
    )


WORLD_FIXTURES.add("shared_ledger")


@pytest.fixture
def shared_ledger(shared_rows) -> dict[str, Cluster]:
    return shared_rows.world("shared_ledger", build_ledger)


@pytest.fixture
def ledger(shared_ledger, db) -> dict[str, Cluster]:
    """The ledger of the module docstring, plus idle-allocation pod rows on 2026-11-24: built once for the tests
    that run one after another with it, each in a transaction of its own (tests/harness/shared_rows.py)."""
    return shared_ledger


def build_ledger() -> dict[str, Cluster]:
    alpha = Cluster.objects.create(name="alpha", prometheus_url="http://prom-alpha:9090")
    beta = Cluster.objects.create(name="beta", prometheus_url="http://prom-beta:9090")
    NodeGroup.objects.create(cluster=alpha, name="h100")
    NodeGroup.objects.create(cluster=beta, name="a100")
    vision = Team.objects.create(name="vision", display_name="Computer Vision")
    Team.objects.create(name="nlp", display_name="Language")
    NamespaceTeam.objects.create(cluster=alpha, namespace="vision-legacy", team=vision)
    for hour in (DAY, DAY + timedelta(hours=1)):
        _pod(alpha, hour, "vision", "train", "Job/resnet", "h100", H100, 10, 4, 5, 1, 2.0)
        _pod(alpha, hour, "vision", "serve", "Deployment/detector", "h100", H100, 2, 1, 1, 0, 2.0)
        _pod(beta, hour, "nlp", "llm", "PyTorchJob/llama", "a100", A100, 8, 2, 6, 0, 3.0)
        _pod(alpha, hour, "unassigned", "misc", "Pod/scratch", "h100", H100, 1, 0, 0, 1, 2.0)
        _node(alpha, hour, "h100", H100, 16, 13, 1, 32, 6)  # charged 20 + 4 + 2, plus unallocated 6
        _node(beta, hour, "a100", A100, 8, 8, 0, 24, 0)
        for cluster in (alpha, beta):
            Bucket.objects.create(cluster=cluster, hour=hour, state="final", status="ok")
    # Who appeared where (the collector records this as it writes buckets): the visibility rule reads it.
    record_teams(alpha, ["vision", "unassigned"], DAY)
    record_teams(beta, ["nlp"], DAY)

    # Idle allocations, latest bucket 2026-11-24 02:00 in both clusters.
    latest = DAY + timedelta(days=1, hours=2)
    for back in range(3):
        hour = latest - timedelta(hours=back)
        pod_hour(alpha, hour, "idle-train", "vision", working=0.0, idle=4.0)  # 3 idle hours: listed
        pod_hour(alpha, hour, "busy-train", "vision", working=3.0, idle=1.0)  # working: not listed
        pod_hour(beta, hour, "idle-llm", "nlp", working=0.02, idle=7.98, gpus=8.0, price=3.0)  # 0.25 %: listed
        pod_hour(alpha, hour, "blind", "vision", working=0.0, idle=0.0, unmeasured=4.0)  # unmeasured: not idle
        if back > 0:
            pod_hour(alpha, hour, "ended", "vision", working=0.0, idle=4.0)  # not in latest bucket: not listed
    pod_hour(alpha, latest, "fresh-idle", "vision", working=0.0, idle=4.0)  # 1 hour only: not listed
    pod_hour(alpha, latest - timedelta(hours=1), "woke-up", "unassigned", working=2.0, idle=2.0)
    pod_hour(alpha, latest, "woke-up", "unassigned", working=0.0, idle=4.0)  # idle 1 hour since work: not listed
    pod_hour(alpha, latest - timedelta(hours=2), "gap", "unassigned", working=0.0, idle=4.0)
    pod_hour(alpha, latest, "gap", "unassigned", working=0.0, idle=4.0)  # missing hour breaks the streak
    pod_hour(alpha, latest - timedelta(hours=1), "idle-misc", "unassigned", working=0.0, idle=1.0, gpus=1.0)
    pod_hour(alpha, latest, "idle-misc", "unassigned", working=0.0, idle=1.0, gpus=1.0)  # 2 hours: listed
    Bucket.objects.create(cluster=alpha, hour=latest, state="provisional", status="ok")
    rebuild_days()
    return {"alpha": alpha, "beta": beta}


def _user(username: str, *, teams=(), staff=False, finance=False) -> User:
    user = User.objects.create_user(username=username, password="x", is_staff=staff)
    for name in teams:
        Team.objects.get_or_create(name=name)[0].members.add(user)
    if finance:
        user.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    return user


def _client(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {create_api_token(user, 30)}")
    return client


@pytest.fixture
def users(ledger):
    return {
        "alice": _user("alice", teams=["vision"]),
        "bob": _user("bob", teams=["nlp"]),
        "carol": _user("carol", finance=True),
        "root": _user("root", staff=True),
        "dave": _user("dave"),
    }


@pytest.fixture
def clients(users):
    """An authenticated APIClient per user: alice (vision), bob (nlp), carol (finance), root (staff), dave."""
    return {name: _client(user) for name, user in users.items()}


@pytest.fixture
def anon():
    return APIClient()
