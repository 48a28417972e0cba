"""The workload rule (apps/inventory/workloads.py), over the owner chains real clusters have."""

from __future__ import annotations

import pytest

from apps.inventory.workloads import workload_of

OWNERS = {
    ("ml", "ReplicaSet", "chat-7d9f"): ("Deployment", "chat"),
    ("ml", "Job", "nightly-2911"): ("CronJob", "nightly"),
    ("ml", "Job", "llama-workers-0"): ("JobSet", "llama"),
    ("ml", "ReplicaSet", "orphan-rs"): None,
    # LeaderWorkerSet (kubernetes-sigs/lws): the leader StatefulSet is the LWS's, the leader pod its StatefulSet's,
    # and each group's worker StatefulSet the leader pod's.
    ("ml", "StatefulSet", "vllm"): ("LeaderWorkerSet", "vllm"),
    ("ml", "Pod", "vllm-0"): ("StatefulSet", "vllm"),
    ("ml", "StatefulSet", "vllm-0"): ("Pod", "vllm-0"),
}
LWS = {"leaderworkerset.sigs.k8s.io/name": "vllm"}


@pytest.mark.parametrize(
    ("owner", "labels", "expected"),
    [
        (("ReplicaSet", "chat-7d9f"), {}, "Deployment/chat"),
        (("Job", "nightly-2911"), {}, "CronJob/nightly"),
        (("Job", "llama-workers-0"), {}, "JobSet/llama"),
        (("StatefulSet", "jupyter-gina"), {}, "StatefulSet/jupyter-gina"),
        (("PyTorchJob", "bert"), {"training.kubeflow.org/job-name": "bert"}, "PyTorchJob/bert"),
        (("LeaderWorkerSet", "vllm"), {}, "LeaderWorkerSet/vllm"),
        (("RayCluster", "rc"), {"ray.io/cluster": "rc"}, "RayCluster/rc"),
        (("Notebook", "nb"), {}, "Notebook/nb"),  # an unknown custom resource is the workload as found
        (None, {}, "Pod/p"),  # no controller: its own workload
        # Jobs could not be listed (or the Job has no controller): the operator label names the JobSet.
        (("Job", "other-job"), {"jobset.sigs.k8s.io/jobset-name": "js"}, "JobSet/js"),
        (None, {"training.kubeflow.org/job-name": "t5", "training.kubeflow.org/operator-name": "tfjob-controller"},
         "TFJob/t5"),
        (("ReplicaSet", "orphan-rs"), {}, "ReplicaSet/orphan-rs"),
        (("StatefulSet", "vllm"), {}, "LeaderWorkerSet/vllm"),  # a leader: its StatefulSet's controller
        (("StatefulSet", "vllm-0"), {}, "LeaderWorkerSet/vllm"),  # a worker: through the leader pod
        # StatefulSets not listed (kube-state-metrics history): the LWS label names it.
        (("StatefulSet", "vllm-1"), LWS, "LeaderWorkerSet/vllm"),
        (("StatefulSet", "db"), {}, "StatefulSet/db"),
    ],
)
def test_it_names_the_top_controller(owner, labels, expected):
    owners = {k: v for k, v in OWNERS.items() if v is not None}
    assert workload_of("ml", "p", owner, labels, owners) == expected


def test_it_stops_on_an_owner_loop():
    loop = {("ml", "Job", "a"): ("Job", "b"), ("ml", "Job", "b"): ("Job", "a")}
    assert workload_of("ml", "p", ("Job", "a"), {}, loop) in ("Job/a", "Job/b")
