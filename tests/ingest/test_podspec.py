"""One reading of a pod spec's containers for pods and for Kueue pod templates: sidecars add up, init
containers take the max, bad quantities are left out (pure, no services)."""

from __future__ import annotations

from apps.ingest.collectors.kubernetes import _to_pod
from apps.ingest.collectors.kueue import parse_workload
from apps.ingest.collectors.podspec import container_requests
from apps.inventory.gpus import device_request

SPEC = {
    "containers": [
        {"name": "train", "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "4"}}},
        {"name": "bad", "resources": {"requests": {"nvidia.com/gpu": "two"}}},
    ],
    "initContainers": [
        {"name": "warmup", "resources": {"limits": {"nvidia.com/gpu": "4"}}},
        {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"nvidia.com/gpu": "1"}}},
    ],
}


def test_it_reads_app_init_and_sidecar_containers_with_nvidia_resources_only():
    assert [(c.name, c.kind, dict(c.resources)) for c in container_requests(SPEC)] == [
        ("train", "app", {"nvidia.com/gpu": 2.0}),
        ("bad", "app", {}),
        ("warmup", "init", {"nvidia.com/gpu": 4.0}),
        ("proxy", "sidecar", {"nvidia.com/gpu": 1.0}),
    ]


def test_a_sidecar_adds_to_the_app_containers_for_pods_and_kueue_pod_sets_alike():
    # app 2 + sidecar 1 = 3 < init 4: the init container's 4 wins; without it, the sidecar adds up to 3.
    no_init = {**SPEC, "initContainers": SPEC["initContainers"][1:]}
    pod = _to_pod({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": no_init, "status": {}})
    assert pod is not None and device_request(pod.containers) == {"nvidia.com/gpu": 3}
    workload = parse_workload(
        {"metadata": {"name": "w", "namespace": "ns"},
         "spec": {"podSets": [{"name": "main", "count": 2, "template": {"spec": no_init}},
                              {"name": "warm", "count": 1, "template": {"spec": SPEC}}]}},
        "v1beta2",
    )
    assert [(ps.name, ps.count, ps.request) for ps in workload.pod_sets] == [
        ("main", 2, {"nvidia.com/gpu": 3}), ("warm", 1, {"nvidia.com/gpu": 4}),
    ]
