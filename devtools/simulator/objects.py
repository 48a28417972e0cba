"""Kubernetes / Kueue JSON objects of a scenario at an instant."""

from __future__ import annotations

from . import dra, hami
from .model import (
    Controller,
    Node,
    Pod,
    Scenario,
    Workload,
    _stable_int,
    _uuid,
    format_quantity,
    iso,
    owner_uid,
    parse_quantity,
    provider_id,
    to_ts,
)

KINDS = ("nodes", "pods", "namespaces", "replicasets", "statefulsets", "jobs", "clusterqueues", "localqueues",
         "workloads", "resourceflavors")
# apiVersion of the owners pods and their controllers refer to
API_VERSION = {
    "Job": "batch/v1", "CronJob": "batch/v1", "ReplicaSet": "apps/v1", "Deployment": "apps/v1",
    "StatefulSet": "apps/v1", "DaemonSet": "apps/v1", "JobSet": "jobset.x-k8s.io/v1alpha2",
    "PyTorchJob": "kubeflow.org/v1", "TFJob": "kubeflow.org/v1", "MPIJob": "kubeflow.org/v2beta1",
    "LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1", "RayCluster": "ray.io/v1", "Pod": "v1",
}


def rv(t: float) -> str:
    return str(int(t))


def _meta(
    sc: Scenario,
    name: str,
    created: float,
    *,
    namespace: str | None = None,
    uid: str | None = None,
    labels: dict | None = None,
    annotations: dict | None = None,
    t: float = 0.0,
    **extra,
) -> dict:
    m = {"name": name}
    if namespace is not None:
        m["namespace"] = namespace
    m["uid"] = uid or _uuid("obj", sc.name, sc.seed, namespace, name)
    m["resourceVersion"] = str(int(max(created, sc.t0 - 86400)) % 10**9 + 1000)
    m["generation"] = 1
    m["creationTimestamp"] = iso(created)
    if labels:
        m["labels"] = dict(labels)
    if annotations:
        m["annotations"] = dict(annotations)
    m.update(extra)
    return m


# ------------------------------------------------------------------------------ nodes
def node_obj(sc: Scenario, n: Node, t: float) -> dict:
    unsched = n.unschedulable(t)
    spec = {"providerID": provider_id(sc.cluster_name, n.name), "podCIDR": "10.244.0.0/24"}
    taints = []
    if n.gpus:
        taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
    if unsched:
        spec["unschedulable"] = True
        taints.append(
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": iso(n.unschedulable_from)}
        )
    if taints:
        spec["taints"] = taints
    hb = iso(max(n.created, t - 37))
    conds = [
        {
            "type": "MemoryPressure",
            "status": "False",
            "reason": "KubeletHasSufficientMemory",
            "message": "kubelet has sufficient memory available",
            "lastHeartbeatTime": hb,
            "lastTransitionTime": iso(n.created + 60),
        },
        {
            "type": "DiskPressure",
            "status": "False",
            "reason": "KubeletHasNoDiskPressure",
            "message": "kubelet has no disk pressure",
            "lastHeartbeatTime": hb,
            "lastTransitionTime": iso(n.created + 60),
        },
        {
            "type": "PIDPressure",
            "status": "False",
            "reason": "KubeletHasSufficientPID",
            "message": "kubelet has sufficient PID available",
            "lastHeartbeatTime": hb,
            "lastTransitionTime": iso(n.created + 60),
        },
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": hb,
            "lastTransitionTime": iso(n.created + 60),
        },
    ]
    labels = dict(n.labels)
    ann = {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}
    if unsched:
        ann["sim.gpufinops.io/cordoned-at"] = iso(n.unschedulable_from)
    ann.update(sc.node_annotations.get(n.name, {}))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": _meta(sc, n.name, n.created, uid=n.uid, labels=labels, annotations=ann),
        "spec": spec,
        "status": {
            "capacity": dict(n.capacity),
            "allocatable": dict(n.allocatable),
            "conditions": conds,
            "addresses": [{"type": "InternalIP", "address": n.ip}, {"type": "Hostname", "address": n.name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": n.uid.replace("-", ""),
                "systemUUID": n.uid,
                "bootID": _uuid("boot", n.name),
                "kernelVersion": "6.1.112-124.190.amzn2023.x86_64",
                "osImage": "Amazon Linux 2023",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kubeletVersion": f"v1.{dra.kubernetes_minor(sc)}.4",
                "kubeProxyVersion": f"v1.{dra.kubernetes_minor(sc)}.4",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": [],
        },
    }


# ------------------------------------------------------------------------------ pods
def _resources(c) -> dict:
    req = {"cpu": c.cpu, "memory": c.memory}
    lim = {"memory": c.memory}
    for r, n in c.gpu.items():
        req[r] = str(n)
        lim[r] = str(n)
    return {"requests": req, "limits": lim}


def _cid(sc, pod, cname):
    return "containerd://" + (_uuid("cid", sc.name, pod.uid, cname).replace("-", "") * 2)


def owner_refs(sc: Scenario, namespace: str, owner: tuple | None) -> list | None:
    """The ``ownerReferences`` naming ``owner`` (kind, name) as the controller, or None."""
    if not owner or owner[0] == "Pod":
        return None
    kind, oname = owner
    return [
        {
            "apiVersion": API_VERSION.get(kind, "v1"),
            "kind": kind,
            "name": oname,
            "uid": owner_uid(sc, namespace, oname),
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def _restart_policy(p: Pod) -> str:
    kind = p.owner[0] if p.owner else ""
    if kind == "Job":
        return "Never"
    return "OnFailure" if API_VERSION.get(kind, "").startswith("kubeflow.org/") else "Always"


def pod_obj(sc: Scenario, p: Pod, t: float) -> dict:
    phase = p.phase(t)
    owner_refs_ = owner_refs(sc, p.namespace, p.owner)
    extra = {}
    if owner_refs_:
        extra["ownerReferences"] = owner_refs_
    if p.deleted_running and p.deleted - 30 <= t < p.deleted:
        extra["deletionTimestamp"] = iso(p.deleted)
        extra["deletionGracePeriodSeconds"] = 30
    meta = _meta(
        sc,
        p.name,
        p.created,
        namespace=p.namespace,
        uid=p.uid,
        labels=p.labels,
        annotations=p.annotations or None,
        **extra,
    )
    if p.workload and p.start is not None:
        meta.setdefault("finalizers", ["batch.kubernetes.io/job-tracking"])
    spec = {
        "containers": [
            {
                "name": c.name,
                "image": c.image,
                "imagePullPolicy": "IfNotPresent",
                "resources": _resources(c),
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            }
            for c in p.containers
        ],
        "restartPolicy": _restart_policy(p),
        "schedulerName": "default-scheduler",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
    }
    if p.init_containers:
        spec["initContainers"] = [
            {
                "name": c.name,
                "image": c.image,
                "resources": _resources(c),
                **({"restartPolicy": "Always"} if c.restartable else {}),
            }
            for c in p.init_containers
        ]
    if p.node_selector:
        spec["nodeSelector"] = dict(p.node_selector)
    if p.node and p.start is not None and t >= p.start:
        spec["nodeName"] = p.node
    status: dict = {"phase": phase, "qosClass": "Burstable"}
    if phase == "Pending":
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": p.pending_message or "0/1 nodes are available",
                "lastProbeTime": None,
                "lastTransitionTime": iso(p.created),
            }
        ]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}
    node = sc.node_by_name[p.node]
    status["hostIP"] = node.ip
    status["hostIPs"] = [{"ip": node.ip}]
    status["podIP"] = p.ip
    status["podIPs"] = [{"ip": p.ip}]
    status["startTime"] = iso(p.start)
    running = phase == "Running"
    ready = "True" if running else "False"
    status["conditions"] = [
        {
            "type": "PodReadyToStartContainers",
            "status": ready,
            "lastProbeTime": None,
            "lastTransitionTime": iso(p.start + 2),
        },
        {"type": "Initialized", "status": "True", "lastProbeTime": None, "lastTransitionTime": iso(p.start + 1)},
        {
            "type": "Ready",
            "status": ready,
            "lastProbeTime": None,
            "lastTransitionTime": iso(p.start + 10 if running else p.finish),
            **({} if running else {"reason": "PodCompleted"}),
        },
        {
            "type": "ContainersReady",
            "status": ready,
            "lastProbeTime": None,
            "lastTransitionTime": iso(p.start + 10 if running else p.finish),
            **({} if running else {"reason": "PodCompleted"}),
        },
        {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": iso(p.start)},
    ]
    cs = []
    for c in p.containers:
        st = {
            "name": c.name,
            "image": c.image,
            "imageID": c.image.split(":")[0] + "@sha256:" + (f"{_stable_int(c.image):064x}")[-64:],
            "containerID": _cid(sc, p, c.name),
            "ready": running,
            "restartCount": 0,
            "started": running,
        }
        if running:
            st["state"] = {"running": {"startedAt": iso(p.start + 5)}}
        else:
            failed = phase == "Failed"
            st["state"] = {
                "terminated": {
                    "exitCode": 1 if failed else 0,
                    "reason": "Error" if failed else "Completed",
                    "startedAt": iso(p.start + 5),
                    "finishedAt": iso(p.finish),
                    "containerID": _cid(sc, p, c.name),
                }
            }
        st["lastState"] = {}
        cs.append(st)
    status["containerStatuses"] = cs
    if p.init_containers:
        status["initContainerStatuses"] = [
            {
                "name": c.name,
                "image": c.image,
                "imageID": c.image.split(":")[0] + "@sha256:" + "0" * 64,
                "containerID": _cid(sc, p, c.name),
                "ready": True,
                "restartCount": 0,
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": iso(p.start + 1),
                        "finishedAt": iso(p.start + 4),
                        "containerID": _cid(sc, p, c.name),
                    }
                },
                "lastState": {},
            }
            for c in p.init_containers
        ]
    if p.idx in sc.pod_claims:
        dra.pod_fields(sc, p, spec, status)
    if p.idx in sc.hami_allocs:
        spec["schedulerName"] = hami.SCHEDULER
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


# ------------------------------------------------------------------------------ ReplicaSets and Jobs
def _template(sc: Scenario, p: Pod) -> dict:
    return {
        "metadata": {"labels": {k: v for k, v in p.labels.items() if not k.startswith("statefulset.")}},
        "spec": {
            "containers": [
                {"name": c.name, "image": c.image, "resources": _resources(c)} for c in p.containers
            ],
            "restartPolicy": _restart_policy(p),
            **({"nodeSelector": dict(p.node_selector)} if p.node_selector else {}),
        },
    }


def replicaset_obj(sc: Scenario, c: Controller, t: float) -> dict:
    pods = [sc.pods[i] for i in c.pods]
    alive = [p for p in pods if p.visible(t)]
    running = [p for p in alive if p.phase(t) == "Running"]
    selector = {k: v for k, v in pods[0].labels.items() if k in ("app", "pod-template-hash")} or {"app": c.name}
    meta = _meta(sc, c.name, c.created, namespace=c.namespace, uid=c.uid, labels=selector,
                 annotations={"deployment.kubernetes.io/desired-replicas": str(len(alive)),
                              "deployment.kubernetes.io/max-replicas": str(len(alive) + 1),
                              "deployment.kubernetes.io/revision": "1"})
    if c.owner:
        meta["ownerReferences"] = owner_refs(sc, c.namespace, c.owner)
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": meta,
        "spec": {"replicas": len(alive), "selector": {"matchLabels": selector}, "template": _template(sc, pods[0])},
        "status": {"replicas": len(alive), "fullyLabeledReplicas": len(alive), "readyReplicas": len(running),
                   "availableReplicas": len(running), "observedGeneration": 1},
    }


def statefulset_obj(sc: Scenario, c: Controller, t: float) -> dict:
    """A StatefulSet; a LeaderWorkerSet's are owned by the LWS (the leaders') or by a group's leader pod."""
    pods = [sc.pods[i] for i in c.pods]
    alive = [p for p in pods if p.visible(t)]
    running = [p for p in alive if p.phase(t) == "Running"]
    keep = ("app", "leaderworkerset.sigs.k8s.io/name", "leaderworkerset.sigs.k8s.io/group-index")
    selector = {k: v for k, v in pods[0].labels.items() if k in keep} or {"app": c.name}
    meta = _meta(sc, c.name, c.created, namespace=c.namespace, uid=c.uid, labels=selector)
    if c.owner and c.owner[0] == "Pod":  # owner_refs names no pods: the leader pod's own uid
        leader = next((p for p in sc.pods if p.namespace == c.namespace and p.name == c.owner[1]), None)
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": c.owner[1],
                                    "uid": leader.uid if leader else owner_uid(sc, c.namespace, c.owner[1]),
                                    "controller": True, "blockOwnerDeletion": True}]
    elif c.owner:
        meta["ownerReferences"] = owner_refs(sc, c.namespace, c.owner)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta,
        "spec": {"replicas": len(alive), "serviceName": c.name, "selector": {"matchLabels": selector},
                 "template": _template(sc, pods[0])},
        "status": {"replicas": len(alive), "readyReplicas": len(running), "availableReplicas": len(running),
                   "currentReplicas": len(alive), "observedGeneration": 1},
    }


def job_obj(sc: Scenario, c: Controller, t: float) -> dict:
    pods = [sc.pods[i] for i in c.pods]
    indexed = any("batch.kubernetes.io/job-completion-index" in p.labels for p in pods)
    labels = {"batch.kubernetes.io/controller-uid": c.uid, "batch.kubernetes.io/job-name": c.name,
              "controller-uid": c.uid, "job-name": c.name}
    if pods:
        labels.update({k: v for k, v in pods[0].labels.items() if k.startswith(("jobset.sigs.k8s.io/", "kueue."))})
    meta = _meta(sc, c.name, c.created, namespace=c.namespace, uid=c.uid, labels=labels)
    if c.owner:
        meta["ownerReferences"] = owner_refs(sc, c.namespace, c.owner)
    template = _template(sc, pods[0]) if pods else {
        "metadata": {}, "spec": {"containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3"}],
                                 "restartPolicy": "Never"}}
    template["metadata"].setdefault("labels", {}).update(
        {"batch.kubernetes.io/controller-uid": c.uid, "batch.kubernetes.io/job-name": c.name})
    spec = {
        "parallelism": max(1, len(pods)),
        "completions": max(1, len(pods)),
        "backoffLimit": 0 if c.owner and c.owner[0] == "JobSet" else 6,
        "completionMode": "Indexed" if indexed else "NonIndexed",
        "suspend": c.suspended,
        "manualSelector": False,
        "podReplacementPolicy": "TerminatingOrFailed",
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": c.uid}},
        "template": template,
    }
    status: dict = {"terminating": 0, "uncountedTerminatedPods": {}}
    started = [p.start for p in pods if p.start is not None and p.start <= t]
    if started:
        status["startTime"] = iso(min(started))
    active = sum(1 for p in pods if p.visible(t) and p.phase(t) in ("Pending", "Running"))
    succeeded = sum(1 for p in pods if p.finish is not None and t >= p.finish and p.end_phase == "Succeeded")
    failed = sum(1 for p in pods if p.finish is not None and t >= p.finish and p.end_phase == "Failed")
    status.update({"active": active, "ready": sum(1 for p in pods if p.held(t)), "succeeded": succeeded,
                   "failed": failed})
    done = [p.finish for p in pods if p.finish is not None and t >= p.finish]
    if pods and len(done) == len(pods):
        end = max(done)
        if failed:
            conds = [("FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
                     ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")]
        else:
            conds = [("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods"),
                     ("Complete", "CompletionsReached", "Reached expected number of succeeded pods")]
            status["completionTime"] = iso(end)
        status["conditions"] = [{"type": ty, "status": "True", "reason": reason, "message": message,
                                 "lastProbeTime": iso(end), "lastTransitionTime": iso(end)}
                                for ty, reason, message in conds]
    elif c.suspended:
        status["conditions"] = [{"type": "Suspended", "status": "True", "reason": "JobSuspended",
                                 "message": "Job suspended", "lastProbeTime": iso(c.created),
                                 "lastTransitionTime": iso(c.created)}]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec, "status": status}


def namespace_obj(sc: Scenario, name: str, labels: dict) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": _meta(sc, name, sc.ns_created[name], uid=_uuid("ns", sc.name, name), labels=labels),
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


# ------------------------------------------------------------------------------ Kueue
G = "kueue.x-k8s.io"


def _q(v, res):
    if v is None:
        return None
    if isinstance(v, str):
        return v
    return format_quantity(float(v), "memory" if res == "memory" else "n")


def workload_usage(sc: Scenario, t: float):
    """(cq, flavor, resource) -> (reserved, used) numeric, and per-cq workload counts."""
    reserved: dict = {}
    used: dict = {}
    counts: dict = {}
    for w in sc.workloads:
        if not w.visible(t):
            continue
        c = counts.setdefault(w.cluster_queue, {"pending": 0, "admitted": 0, "reserving": 0})
        if w.finished_at(t):
            continue
        if w.admitted_at(t):
            c["admitted"] += 1
            c["reserving"] += 1
            for r, q in w.per_pod.items():
                k = (w.cluster_queue, w.flavor, r)
                v = parse_quantity(q) * w.count
                reserved[k] = reserved.get(k, 0.0) + v
                used[k] = used.get(k, 0.0) + v
        else:
            c["pending"] += 1
    return reserved, used, counts


def resourceflavor_obj(sc, f, version) -> dict:
    spec = {
        "nodeLabels": dict(f.node_labels),
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    return {
        "apiVersion": f"{G}/{version}",
        "kind": "ResourceFlavor",
        "metadata": _meta(sc, f.name, sc.t0 - 60 * 86400, finalizers=["kueue.x-k8s.io/resource-in-use"]),
        "spec": spec,
    }


def clusterqueue_obj(sc, cq, t, version, usage) -> dict:
    reserved, used, counts = usage
    flavors = []
    covered = []
    for fname, res in cq.flavors:
        rs = []
        for r, (nom, bl, ll) in res.items():
            d = {"name": r, "nominalQuota": _q(nom, r)}
            if bl is not None:
                d["borrowingLimit"] = _q(bl, r)
            if ll is not None:
                d["lendingLimit"] = _q(ll, r)
            rs.append(d)
            if r not in covered:
                covered.append(r)
        flavors.append({"name": fname, "resources": rs})
    spec = {
        "namespaceSelector": cq.namespace_selector,
        "resourceGroups": [{"coveredResources": covered, "flavors": flavors}],
        "queueingStrategy": "BestEffortFIFO",
        "preemption": {
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "Never"},
            "withinClusterQueue": "LowerPriority",
        },
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "stopPolicy": "None",
    }
    if cq.cohort:
        spec["cohortName" if version == "v1beta2" else "cohort"] = cq.cohort

    def fl(src, with_borrowed=True):
        out = []
        for fname, res in cq.flavors:
            rs = []
            for r, (nom, _bl, _ll) in res.items():
                v = src.get((cq.name, fname, r), 0.0)
                d = {"name": r, "total": format_quantity(v, "memory" if r == "memory" else "n")}
                if with_borrowed:
                    b = max(0.0, v - parse_quantity(_q(nom, r)))
                    d["borrowed"] = format_quantity(b, "memory" if r == "memory" else "n")
                rs.append(d)
            out.append({"name": fname, "resources": rs})
        return out

    c = counts.get(cq.name, {"pending": 0, "admitted": 0, "reserving": 0})
    status = {
        "flavorsReservation": fl(reserved),
        "flavorsUsage": fl(used),
        "pendingWorkloads": c["pending"],
        "reservingWorkloads": c["reserving"],
        "admittedWorkloads": c["admitted"],
        "conditions": [
            {
                "type": "Active",
                "status": "True",
                "reason": "Ready",
                "message": "Can admit new workloads",
                "lastTransitionTime": iso(sc.t0 - 30 * 86400),
                "observedGeneration": 1,
            }
        ],
        "fairSharing": {"weightedShare": 0},
    }
    if version == "v1beta1":
        status["pendingWorkloadsStatus"] = {"clusterQueuePendingWorkload": [], "lastChangeTime": iso(t)}
    return {
        "apiVersion": f"{G}/{version}",
        "kind": "ClusterQueue",
        "metadata": _meta(sc, cq.name, sc.t0 - 60 * 86400, finalizers=["kueue.x-k8s.io/resource-in-use"]),
        "spec": spec,
        "status": status,
    }


def localqueue_obj(sc, lq, t, version) -> dict:
    reserved: dict = {}
    used: dict = {}
    counts = {"pending": 0, "admitted": 0, "reserving": 0}
    for w in sc.workloads:
        if w.namespace != lq.namespace or w.queue != lq.name or not w.visible(t) or w.finished_at(t):
            continue
        if w.admitted_at(t):
            counts["admitted"] += 1
            counts["reserving"] += 1
            for r, q in w.per_pod.items():
                k = (w.flavor, r)
                v = parse_quantity(q) * w.count
                reserved[k] = reserved.get(k, 0.0) + v
                used[k] = used.get(k, 0.0) + v
        else:
            counts["pending"] += 1
    cq = next((c for c in sc.cluster_queues if c.name == lq.cluster_queue), None)

    def fl(src):
        out = []
        for fname, res in cq.flavors if cq else []:
            out.append(
                {
                    "name": fname,
                    "resources": [
                        {
                            "name": r,
                            "total": format_quantity(src.get((fname, r), 0.0), "memory" if r == "memory" else "n"),
                        }
                        for r in res
                    ],
                }
            )
        return out

    status = {
        "pendingWorkloads": counts["pending"],
        "reservingWorkloads": counts["reserving"],
        "admittedWorkloads": counts["admitted"],
        "flavorsReservation": fl(reserved),
        "conditions": [
            {
                "type": "Active",
                "status": "True",
                "reason": "Ready",
                "message": "Can submit new workloads to localQueue",
                "lastTransitionTime": iso(sc.t0 - 30 * 86400),
                "observedGeneration": 1,
            }
        ],
    }
    if version == "v1beta2":
        status["flavorsUsage"] = fl(used)
    else:
        status["flavorUsage"] = fl(used)
        status["flavors"] = [{"name": f, "resources": list(res)} for f, res in (cq.flavors if cq else [])]
    return {
        "apiVersion": f"{G}/{version}",
        "kind": "LocalQueue",
        "metadata": _meta(sc, lq.name, sc.t0 - 60 * 86400, namespace=lq.namespace),
        "spec": {"clusterQueue": lq.cluster_queue, "stopPolicy": "None"},
        "status": status,
    }


def workload_obj(sc, w: Workload, t, version) -> dict:
    gpu_res = [r for r in w.per_pod if r not in ("cpu", "memory")]
    template = {
        "metadata": {"labels": {"kueue.x-k8s.io/queue-name": w.queue}},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "resources": {"requests": dict(w.per_pod), "limits": {r: w.per_pod[r] for r in gpu_res}},
                }
            ],
            "restartPolicy": "Never",
            "nodeSelector": dict(next((f.node_labels for f in sc.flavors if f.name == w.flavor), {})),
        },
    }
    spec = {
        "active": True,
        "queueName": w.queue,
        "priority": w.priority,
        "podSets": [{"name": "main", "count": w.count, "template": template}],
    }
    if version == "v1beta2":
        spec["priorityClassRef"] = None
        spec.pop("priorityClassRef")
    kind, oname = w.owner
    owner = owner_refs(sc, w.namespace, w.owner) or [
        {
            "apiVersion": "v1",
            "kind": kind,
            "name": oname,
            "uid": owner_uid(sc, w.namespace, oname),
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    status: dict = {}
    conds = []
    total = {
        r: format_quantity(parse_quantity(q) * w.count, "memory" if r == "memory" else "n")
        for r, q in w.per_pod.items()
    }
    if w.admitted is not None and t >= w.admitted:
        at = iso(w.admitted)
        conds.append(
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": f"Quota reserved in ClusterQueue {w.cluster_queue}",
                "lastTransitionTime": at,
                "observedGeneration": 1,
            }
        )
        conds.append(
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "The workload is admitted",
                "lastTransitionTime": at,
                "observedGeneration": 1,
            }
        )
        status["admission"] = {
            "clusterQueue": w.cluster_queue,
            "podSetAssignments": [
                {
                    "name": "main",
                    "flavors": dict.fromkeys(w.per_pod, w.flavor),
                    "resourceUsage": total,
                    "count": w.count,
                }
            ],
        }
        if w.finished_at(t):
            conds.append(
                {
                    "type": "Finished",
                    "status": "True",
                    "reason": w.finish_reason,
                    "message": "Job finished successfully"
                    if w.finish_reason == "Succeeded"
                    else "Job has reached the specified backoff limit",
                    "lastTransitionTime": iso(w.finished),
                    "observedGeneration": 1,
                }
            )
    else:
        conds.append(
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": w.pending_message or "couldn't assign flavors to pod set main",
                "lastTransitionTime": iso(w.created),
                "observedGeneration": 1,
            }
        )
        status["resourceRequests"] = [{"name": "main", "resources": total}]
    status["conditions"] = conds
    return {
        "apiVersion": f"{G}/{version}",
        "kind": "Workload",
        "metadata": _meta(
            sc,
            w.name,
            w.created,
            namespace=w.namespace,
            uid=w.uid,
            labels={"kueue.x-k8s.io/job-uid": owner_uid(sc, w.namespace, oname)},
            ownerReferences=owner,
            finalizers=["kueue.x-k8s.io/resource-in-use"],
        ),
        "spec": spec,
        "status": status,
    }


def k8s_objects(sc: Scenario, kind: str, at, version: str = "v1beta2") -> list[dict]:
    """The objects of ``kind`` (one of ``KINDS``) as the API server lists them at ``at`` (datetime or Unix time)."""
    t = to_ts(at)
    if kind == "nodes":
        return [node_obj(sc, n, t) for n in sc.nodes if n.created <= t]
    if kind == "pods":
        return [pod_obj(sc, p, t) for p in sc.pods if p.created <= t < p.deleted]
    if kind == "namespaces":
        return [namespace_obj(sc, n, lab) for n, lab in sc.namespaces.items()]
    if kind in ("replicasets", "jobs", "statefulsets"):
        want, build = {"replicasets": ("ReplicaSet", replicaset_obj), "jobs": ("Job", job_obj),
                       "statefulsets": ("StatefulSet", statefulset_obj)}[kind]
        return [build(sc, c, t) for c in sc.controllers.values() if c.kind == want and c.visible(t)]
    if kind == "resourceflavors":
        return [resourceflavor_obj(sc, f, version) for f in sc.flavors]
    if kind == "clusterqueues":
        usage = workload_usage(sc, t)
        return [clusterqueue_obj(sc, cq, t, version, usage) for cq in sc.cluster_queues]
    if kind == "localqueues":
        return [localqueue_obj(sc, lq, t, version) for lq in sc.local_queues]
    if kind == "workloads":
        return [workload_obj(sc, w, t, version) for w in sc.workloads if w.visible(t)]
    raise ValueError(f"unknown kind {kind!r}")
