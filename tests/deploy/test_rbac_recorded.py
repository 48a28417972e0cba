"""The collector's ClusterRole against what a real collection actually asked the Kubernetes API.

A recording proxy (tests/harness/k8s_recorder.py) sits between the official client and the simulator's API;
`apps.ingest.services.collect_cluster` runs through the production path (kubeconfig -> api_client_for,
PrometheusSource). Every (verb, apiGroup, resource) it used must be granted by the rendered ClusterRole, and
the ClusterRole may grant nothing else: no other verb than get/list/watch, no resource never touched except
the few listed below with their reason.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.deploy.conftest import objects_of
from tests.harness.k8s_recorder import start_recorded_world

# Granted although this run may not touch them, each for a reason (docs/deploy.md, "RBAC").
UNTOUCHED_BUT_GRANTED = {
    ("kueue.x-k8s.io", "resourceflavors"): "quotas are per flavor; mapping a flavor to a GPU model needs its "
                                           "nodeLabels (deploy-and-operate.md §1.4)",
}
# What a collection asks the Kubernetes API, at least: GPU nodes, pods and namespaces; the owners of pods
# (ReplicaSet -> Deployment, Job -> CronJob or JobSet, StatefulSet -> LeaderWorkerSet), which the simulator
# serves; Kueue's workloads.
EXPECTED_CALLS = {("list", "", "pods"), ("list", "", "nodes"), ("list", "", "namespaces"),
                  ("list", "apps", "replicasets"), ("list", "apps", "statefulsets"), ("list", "batch", "jobs"),
                  ("list", "kueue.x-k8s.io", "workloads")}


# Read only where the cluster serves it (discovery says so): `mixed` serves DRA, `demo` does not.
DRA_CALLS = {("list", "resource.k8s.io", "resourceslices"), ("list", "resource.k8s.io", "resourceclaims"),
             ("list", "resource.k8s.io", "deviceclasses")}


@pytest.fixture(params=["demo", "mixed"])
def recorded_world(tmp_path, request):
    yield from start_recorded_world(tmp_path, scenario_name=request.param)


def granted(role: dict) -> set[tuple[str, str, str]]:
    return {(verb, group, resource) for rule in role["rules"] for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]}


@pytest.mark.django_db
def test_cluster_role_grants_exactly_what_a_collection_used(recorded_world, rendered):
    from apps.ingest.services import collect_cluster
    from apps.inventory.models import Cluster

    world = recorded_world
    cluster = Cluster.objects.create(name="rbac-probe", prometheus_url=world.prometheus_url,
                                     kubeconfig_path=world.kubeconfig)
    hours = [world.end - timedelta(hours=2), world.end - timedelta(hours=1)]
    report = collect_cluster(cluster, hours=hours)
    assert report.written == hours, (report.failed, report.degraded)  # a real collection ran to the end

    calls = world.recorder.calls
    print("\nrecorded Kubernetes API calls:")
    for c in calls:
        print(f"  {c.method} {c.path} -> {c.status}: {c.verb} {c.group!r} {c.resource}" if c.is_resource
              else f"  {c.method} {c.path} -> {c.status}: non-resource URL")
    used = world.recorder.permissions
    assert used >= EXPECTED_CALLS
    with_dra = bool(world.scenario.dra_versions)
    if with_dra:
        assert used >= DRA_CALLS
    else:  # no DRA: not one request to the group, so not one failed request either
        assert not [c for c in calls if c.group == "resource.k8s.io" or "/resource.k8s.io" in c.path]
    owners = [c for c in calls if c.resource in ("replicasets", "jobs", "statefulsets")]
    assert owners and all(c.status == 200 and c.verb == "list" and not c.namespace for c in owners)
    assert not [c for c in calls if not c.is_resource and not c.path.startswith(("/api", "/apis"))]

    for overlay, objects in rendered.items():
        (role,) = objects_of(objects, "ClusterRole")
        allowed = granted(role)
        assert used <= allowed, f"{overlay}: the collectors used calls the ClusterRole does not grant: " \
                                f"{sorted(used - allowed)}"
        assert {verb for verb, _, _ in allowed} <= {"get", "list", "watch"}
        touched = {(group, resource) for _, group, resource in used}
        extra = {(group, resource) for _, group, resource in allowed} - touched
        if not with_dra:
            extra -= {(group, resource) for _, group, resource in DRA_CALLS}
        assert extra <= set(UNTOUCHED_BUT_GRANTED), f"{overlay}: granted but never used: {sorted(extra)}"
        assert not any(resource == "secrets" or "*" in resource for _, _, resource in allowed)
