"""The workload rule (ledger.md "Workloads"): team leads think in jobs, not pods.

A pod's workload is its top controller, followed through `ownerReferences` with `controller: true`:
ReplicaSet -> Deployment, Job -> CronJob or JobSet, StatefulSet, LeaderWorkerSet. Where the chain ends in a
custom resource the operator's well-known label names it (Kubeflow `training.kubeflow.org/job-name`, Ray
`ray.io/cluster`, JobSet `jobset.sigs.k8s.io/jobset-name`). It is written `Kind/name`, in the pod's
namespace. A pod with no controller is its own workload, `Pod/name`.

LeaderWorkerSet (the usual way to serve a model across nodes): a group's leader pod is owned by the
StatefulSet `<lws>`, owned by the LeaderWorkerSet; its workers by the StatefulSet `<lws>-<group>`, owned by
the leader pod. The climb goes through StatefulSets and that leader pod (the collector lists StatefulSets and
records the controller of every StatefulSet pod); where it cannot (kube-state-metrics history names no
StatefulSet's owner) the pods' `leaderworkerset.sigs.k8s.io/name` label does.

This is the one home of the rule; the collectors hand over owner references, the ledger stores the result.
"""

from __future__ import annotations

from collections.abc import Mapping

# Owners whose own controller the collector reads (listing them, and StatefulSet pods: LWS leaders), to climb.
CLIMBABLE = frozenset({"ReplicaSet", "Job", "StatefulSet", "Pod"})
# Operator labels naming the custom resource a pod belongs to, when the owner chain ends in one.
OPERATOR_LABELS: tuple[tuple[str, str], ...] = (
    ("jobset.sigs.k8s.io/jobset-name", "JobSet"),
    ("training.kubeflow.org/job-name", ""),  # kind from training.kubeflow.org/operator-name (pytorchjob-...)
    ("ray.io/cluster", "RayCluster"),
    ("leaderworkerset.sigs.k8s.io/name", "LeaderWorkerSet"),
)
KUBEFLOW_OPERATOR_LABEL = "training.kubeflow.org/operator-name"
# Every pod label the rule reads (kube-state-metrics history must carry them to name a workload).
WORKLOAD_LABELS: tuple[str, ...] = (*(label for label, _ in OPERATOR_LABELS), KUBEFLOW_OPERATOR_LABEL)
KUBEFLOW_KINDS = {
    "pytorchjob-controller": "PyTorchJob",
    "tfjob-controller": "TFJob",
    "mpijob-controller": "MPIJob",
    "xgboostjob-controller": "XGBoostJob",
    "paddlejob-controller": "PaddleJob",
    "jaxjob-controller": "JAXJob",
}
MAX_DEPTH = 4  # a chain longer than this is a loop in bad data: stop there

Owner = tuple[str, str]  # (kind, name)
OwnerMap = Mapping[tuple[str, str, str], Owner]  # (namespace, kind, name) -> that object's controller


def workload_of(
    namespace: str, pod: str, owner: Owner | None, labels: Mapping[str, str], owners: OwnerMap
) -> str:
    """`Kind/name` of the pod's top controller (see the module docstring).

    1. Climb from the pod's controller through ReplicaSets, Jobs, StatefulSets and (LWS workers) the leader
       pod whose own controller is known.
    2. Where that ends at a pod, a ReplicaSet, a Job or a StatefulSet (their controller unknown, or none), an
       operator label naming a custom resource wins; any other controller (a Deployment, a PyTorchJob, a
       Notebook...) is the workload as found.
    """
    kind, name = owner if owner else ("Pod", pod)
    for _ in range(MAX_DEPTH):
        parent = owners.get((namespace, kind, name)) if kind in CLIMBABLE else None
        if parent is None:
            break
        kind, name = parent
    if kind in CLIMBABLE:
        kind, name = _operator_workload(labels) or (kind, name)
    return f"{kind}/{name}"


def _operator_workload(labels: Mapping[str, str]) -> Owner | None:
    for label, kind in OPERATOR_LABELS:
        value = labels.get(label)
        if value:
            if not kind:
                kind = KUBEFLOW_KINDS.get(labels.get(KUBEFLOW_OPERATOR_LABEL, ""), "TrainingJob")
            return kind, value
    return None


def split_workload(workload: str) -> Owner:
    """`Kind/name` -> (kind, name)."""
    kind, _, name = workload.partition("/")
    return kind, name
