"""Scenario contents: demo (64 GPUs, every case), large (10,000 GPUs), tiny (fragmentation test)."""

from __future__ import annotations

import random

from .scenario import (
    SEG,
    ClusterQueue,
    Flavor,
    LocalQueue,
    Scenario,
    Unit,
    Workload,
    _a5,
    _uuid,
)

H = 3600.0
D = 86400.0

IMG_TRAIN = "nvcr.io/nvidia/pytorch:24.05-py3"
IMG_SERVE = "vllm/vllm-openai:v0.6.3"
IMG_NB = "quay.io/jupyter/pytorch-notebook:cuda12-2024-10-14"
IMG_TRITON = "nvcr.io/nvidia/tritonserver:24.05-py3"


def _hash5(sc, *parts) -> str:
    return _uuid(sc.name, sc.seed, *parts).replace("-", "")[:5]


def _rs(sc, *parts) -> str:
    h = _uuid(sc.name, sc.seed, "rs", *parts).replace("-", "")
    return h[:10]


def whole(sc: Scenario, node: str, gpus, ghost_from: int | None = None) -> list:
    out = []
    for i, g in enumerate(gpus):
        out.append(
            Unit(
                entity=sc.gpu_entity(node, g).idx,
                resource="nvidia.com/gpu",
                share=1.0,
                ghost=ghost_from is not None and i >= ghost_from,
            )
        )
    return out


def mig(sc: Scenario, node: str, gpu: int, gis) -> list:
    out = []
    for gi in gis:
        e = sc.mig_entity(node, gpu, gi)
        out.append(Unit(entity=e.idx, resource=f"nvidia.com/mig-{e.profile}", share=e.slices / 7.0))
    return out


def ts_unit(sc: Scenario, node: str, gpu: int, replica: int) -> list:
    n = sc.node_by_name[node]
    e = sc.gpu_entity(node, gpu)
    res = n.shared_resource or "nvidia.com/gpu"
    return [Unit(entity=e.idx, resource=res, share=1.0 / n.timesliced, vgpu=str(replica))]


def add_workload(
    sc: Scenario,
    namespace: str,
    name: str,
    lq: str,
    cq: str,
    flavor: str,
    count: int,
    gpus: int,
    created: float,
    admitted: float | None,
    finished: float | None = None,
    reason: str = "Succeeded",
    cpu: str = "16",
    memory: str = "128Gi",
    owner=("Job", ""),
    pending_message: str = "",
    gpu_resource: str = "nvidia.com/gpu",
) -> Workload:
    wl = Workload(
        namespace=namespace,
        name=name,
        uid=_uuid("wl", sc.name, sc.seed, namespace, name),
        queue=lq,
        cluster_queue=cq,
        flavor=flavor,
        count=count,
        per_pod={"cpu": cpu, "memory": memory, gpu_resource: str(gpus)},
        created=created,
        admitted=admitted,
        finished=finished,
        finish_reason=reason,
        owner=owner,
        pending_message=pending_message,
    )
    if finished is not None:
        wl.deleted = finished + 3 * H
    sc.workloads.append(wl)
    return wl


def _job_names(sc, base: str, *parts):
    job = f"{base}-{_hash5(sc, 'job', base, *parts)}"
    return job, f"job-{job}-{_hash5(sc, 'wl', base, *parts)}"


def kueue_job(
    sc: Scenario,
    namespace: str,
    base: str,
    lq: str,
    cq: str,
    flavor: str,
    placements: list,
    gpus: int,
    start: float | None,
    finish: float | None = None,
    phase: str | None = None,
    act: str = "batch",
    created: float | None = None,
    labels: dict | None = None,
    pending_pods: bool = False,
    node_selector: dict | None = None,
    pending_message: str = "",
    xid: int = 0,
    cpu: str = "16",
    memory: str = "128Gi",
    container: str = "main",
    acts: list | None = None,
):
    """A Kueue-managed batch/v1 Job with len(placements) pods of ``gpus`` GPUs each."""
    job, wname = _job_names(sc, base, start, created)
    created = created if created is not None else start
    wl = add_workload(
        sc,
        namespace,
        wname,
        lq,
        cq,
        flavor,
        len(placements),
        gpus,
        created,
        admitted=created if (start is not None or pending_pods) else None,
        finished=finish,
        reason=phase or "Succeeded",
        cpu=cpu,
        memory=memory,
        owner=("Job", job),
        pending_message=pending_message,
    )
    pods = []
    for i, pl in enumerate(placements):
        suffix = _hash5(sc, "pod", job, i)
        pname = f"{job}-{i}-{suffix}" if len(placements) > 1 else f"{job}-{suffix}"
        lab = {
            "batch.kubernetes.io/job-name": job,
            "job-name": job,
            "batch.kubernetes.io/controller-uid": _uuid("jobuid", sc.name, job),
            "app.kubernetes.io/name": base,
        }
        if len(placements) > 1:
            lab["batch.kubernetes.io/job-completion-index"] = str(i)
        lab.update(labels or {})
        node, units = pl if pl is not None else (None, [])
        p = sc.add_pod(
            namespace,
            pname,
            node=node,
            start=start if node else None,
            gpus={"nvidia.com/gpu": gpus},
            units=units,
            act=(acts[i] if acts else act),
            finish=finish if node else None,
            end_phase=phase,
            labels=lab,
            owner=("Job", job),
            created=created,
            container=container,
            workload=wl,
            node_selector=node_selector,
            pending_message=pending_message,
            xid=xid,
            cpu=cpu,
            memory=memory,
        )
        if node is None and finish is not None:
            p.deleted = finish + 3 * H
        pods.append(p)
    return wl, pods


def _queues(sc: Scenario):
    sc.flavors = [
        Flavor("h100", {"karpenter.sh/nodepool": "h100-train"}),
        Flavor("a100", {"cloud.google.com/gke-nodepool": "a100-pool"}),
        Flavor("l4", {"nvidia.com/gpu.product": "NVIDIA-L4"}),
    ]
    sc.cluster_queues = [
        ClusterQueue(
            "research-cq",
            "gpu-cohort",
            [("h100", {"cpu": (384, 192, None), "memory": ("4Ti", "2Ti", None), "nvidia.com/gpu": (16, 8, 4)})],
            {"matchLabels": {"team": "research"}},
        ),
        ClusterQueue(
            "data-cq",
            "gpu-cohort",
            [("h100", {"cpu": (192, 0, 96), "memory": ("2Ti", "0", "1Ti"), "nvidia.com/gpu": (8, 0, 4)})],
            {"matchLabels": {"team": "data"}},
        ),
        ClusterQueue(
            "platform-cq",
            "gpu-cohort",
            [("h100", {"cpu": (192, None, None), "memory": ("2Ti", None, None), "nvidia.com/gpu": (8, None, 8)})],
            {},
        ),
        ClusterQueue(
            "serving-cq",
            "gpu-cohort",
            [
                ("a100", {"cpu": (96, None, 24), "memory": ("1Ti", None, "256Gi"), "nvidia.com/gpu": (8, None, 2)}),
                ("l4", {"cpu": (48, None, None), "memory": ("192Gi", None, None), "nvidia.com/gpu": (4, None, None)}),
            ],
            {"matchLabels": {"team": "serving"}},
        ),
    ]
    sc.local_queues = [
        LocalQueue("ml-training", "research-lq", "research-cq"),
        LocalQueue("batch", "data-lq", "data-cq"),
        LocalQueue("llm-serving", "serving-lq", "serving-cq"),
        LocalQueue("sandbox", "platform-lq", "platform-cq"),
    ]


def build_demo(sc: Scenario):
    T0, T1 = sc.t0, sc.t1
    rng = random.Random(sc.seed * 7919 + 1)
    # ---------------------------------------------------------------- namespaces
    sc.add_namespace("ml-training", {"team": "research"})
    sc.add_namespace("notebooks", {"team": "research"})
    sc.add_namespace("llm-serving", {"team": "serving"})
    sc.add_namespace("batch", {"team": "data"})
    sc.add_namespace("sandbox")  # no team -> unassigned
    sc.add_namespace("default")
    sc.add_namespace("kube-system")
    sc.add_namespace("gpu-operator")
    sc.add_namespace("kueue-system")
    # ---------------------------------------------------------------- nodes
    for i in range(4):
        sc.add_node(
            f"h100-train-{i}",
            "H100",
            8,
            {
                "karpenter.sh/nodepool": "h100-train",
                "karpenter.sh/capacity-type": "on-demand",
                "nvidia.com/gpu.clique": "sim-clique.0",
            },
            instance_type="p5.48xlarge",
            cpu="192",
            memory="2097152Mi",
        )
    h100_bal = [[("3g.40gb", 2), ("2g.20gb", 3), ("1g.10gb", 9), ("1g.10gb", 10)] for _ in range(4)]
    sc.add_node(
        "h100-mig-0",
        "H100",
        4,
        {"karpenter.sh/nodepool": "h100-mig", "karpenter.sh/capacity-type": "on-demand"},
        kind="mig",
        mig_layout=h100_bal,
        instance_type="p5.48xlarge",
        cpu="96",
        memory="1048576Mi",
    )
    sc.add_node(
        "a100-0",
        "A100",
        8,
        {"cloud.google.com/gke-nodepool": "a100-pool", "cloud.google.com/gke-accelerator": "nvidia-a100-80gb"},
        instance_type="a2-ultragpu-8g",
        cpu="96",
        memory="1392640Mi",
        zone="us-central1-a",
        unschedulable_from=T0 + 1 * D,
    )
    a100_layout = [
        [("1g.10gb", gi) for gi in range(7, 14)],
        [("3g.40gb", 2), ("2g.20gb", 3), ("2g.20gb", 4)],
        [("4g.40gb", 1), ("3g.40gb", 2)],
        [("7g.80gb", 0)],
    ]
    sc.add_node(
        "a100-mig-0",
        "A100",
        8,
        {"cloud.google.com/gke-nodepool": "a100-pool", "cloud.google.com/gke-accelerator": "nvidia-a100-80gb"},
        kind="mig",
        mig_layout=a100_layout,
        instance_type="a2-ultragpu-8g",
        cpu="96",
        memory="1392640Mi",
        zone="us-central1-a",
    )
    sc.add_node("l4-0", "L4", 4, {}, instance_type="g2-standard-48", cpu="48", memory="196608Mi", zone="us-central1-b")
    sc.add_node(
        "l4-ts-0",
        "L4",
        4,
        {},
        kind="timesliced",
        replicas=4,
        instance_type="g2-standard-48",
        cpu="48",
        memory="196608Mi",
        zone="us-central1-b",
    )
    sc.add_node(
        "l4-shared-0",
        "L4",
        2,
        {},
        kind="shared",
        replicas=4,
        shared_resource="nvidia.com/gpu.shared",
        instance_type="g2-standard-24",
        cpu="24",
        memory="98304Mi",
        zone="us-central1-b",
    )
    sc.add_node(
        "l4-noplugin-0",
        "L4",
        2,
        {},
        kind="noplugin",
        zero_alloc=True,
        instance_type="g2-standard-24",
        cpu="24",
        memory="98304Mi",
        zone="us-central1-b",
    )
    sc.add_node(
        "cpu-0",
        "",
        0,
        {"karpenter.sh/nodepool": "general"},
        kind="cpu",
        instance_type="m7i.8xlarge",
        cpu="32",
        memory="131072Mi",
    )
    _queues(sc)
    # label loss: series of a100-mig-0 GPU 6 never carry pod identity
    sc.gpu_entity("a100-mig-0", 6).labels_lost = True

    # ---------------------------------------------------------------- training (distributed, research-cq)
    kueue_job(
        sc,
        "ml-training",
        "llm-pretrain",
        "research-lq",
        "research-cq",
        "h100",
        [("h100-train-0", whole(sc, "h100-train-0", range(8))), ("h100-train-1", whole(sc, "h100-train-1", range(8)))],
        8,
        start=T0 - 2 * D,
        acts=["train", "train_throttled"],
        container="pytorch",
        labels={"training.kubeflow.org/job-role": "worker"},
        cpu="96",
        memory="1024Gi",
    )
    # eval job on h100-train-3 (research)
    kueue_job(
        sc,
        "ml-training",
        "eval-sweep",
        "research-lq",
        "research-cq",
        "h100",
        [("h100-train-3", whole(sc, "h100-train-3", range(4)))],
        4,
        start=T0 + 3 * D,
        act="eval",
        cpu="32",
        memory="256Gi",
    )
    # fragmentation-pending 4-GPU finetune (admitted by Kueue, unschedulable)
    kueue_job(
        sc,
        "ml-training",
        "finetune-4gpu",
        "research-lq",
        "research-cq",
        "h100",
        [None],
        4,
        start=None,
        created=T1 - 6 * H,
        pending_pods=True,
        node_selector={"karpenter.sh/nodepool": "h100-train"},
        pending_message="0/11 nodes are available: 1 node(s) were unschedulable, 3 Insufficient nvidia.com/gpu, "
        "7 node(s) didn't match Pod's node affinity/selector. preemption: 0/11 nodes are "
        "available: 11 No preemption victims found for incoming pod.",
        cpu="32",
        memory="256Gi",
    )
    # quota-pending workloads (no pods: Job suspended by Kueue)
    add_workload(
        sc,
        "ml-training",
        "job-llm-sweep-" + _hash5(sc, "sweep") + "-" + _hash5(sc, "sweepw"),
        "research-lq",
        "research-cq",
        "h100",
        1,
        8,
        created=T1 - 5 * H,
        admitted=None,
        owner=("Job", "llm-sweep-" + _hash5(sc, "sweep")),
        pending_message="couldn't assign flavors to pod set main: insufficient unused quota for "
        "nvidia.com/gpu in flavor h100, 8 more needed",
        cpu="32",
        memory="256Gi",
    )
    add_workload(
        sc,
        "batch",
        "job-backfill-" + _hash5(sc, "bf") + "-" + _hash5(sc, "bfw"),
        "data-lq",
        "data-cq",
        "h100",
        2,
        4,
        created=T1 - 3 * H,
        admitted=None,
        owner=("Job", "backfill-" + _hash5(sc, "bf")),
        pending_message="couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu "
        "in flavor h100, request > maximum capacity",
        cpu="16",
        memory="128Gi",
    )
    # init-container pod: init requests 2 GPUs, app 1 -> effective 2; second GPU never attributed
    t = _a5(T0 + 4 * D + 2 * H)
    sc.add_pod(
        "ml-training",
        "data-prep-" + _hash5(sc, "dp"),
        node="h100-train-2",
        start=t,
        gpus={"nvidia.com/gpu": 1},
        init_gpus={"nvidia.com/gpu": 2},
        units=whole(sc, "h100-train-2", [6, 7], ghost_from=1),
        act="batch",
        finish=t + 3 * H,
        end_phase="Succeeded",
        owner=("Job", "data-prep"),
        labels={"job-name": "data-prep"},
    )
    # ---------------------------------------------------------------- h100-train-2: data batch stream
    t = _a5(T0 + 0.5 * H)
    stop = T1 - 10 * H
    n = 0
    while True:
        dur = _a5(rng.uniform(1, 4) * H) or SEG
        if t + dur > stop:
            break
        failed = rng.random() < 0.3
        kueue_job(
            sc,
            "batch",
            f"etl-embed-{n:03d}",
            "data-lq",
            "data-cq",
            "h100",
            [("h100-train-2", whole(sc, "h100-train-2", range(4)))],
            4,
            start=t,
            finish=t + dur,
            phase="Failed" if failed else "Succeeded",
            act="batch",
            xid=43 if failed else 0,
        )
        n += 1
        t = t + dur + _a5(rng.uniform(0.5, 2.5) * H)
        t = _a5(t)
    kueue_job(
        sc,
        "batch",
        "reindex-long",
        "data-lq",
        "data-cq",
        "h100",
        [("h100-train-2", whole(sc, "h100-train-2", range(4)))],
        4,
        start=stop,
        act="batch",
    )
    # notebooks on h100-train-2 GPU 4 (idle for hours) and GPU 5 (team override via pod label)
    sc.add_pod(
        "notebooks",
        "jupyter-alice-0",
        node="h100-train-2",
        start=_a5(T0 + 1 * D),
        gpus={"nvidia.com/gpu": 1},
        units=whole(sc, "h100-train-2", [4]),
        act="notebook_idle",
        active_until=_a5(T0 + 1 * D + 1 * H),
        owner=("StatefulSet", "jupyter-alice"),
        container="notebook",
        image=IMG_NB,
        labels={
            "app": "jupyter",
            "hub.jupyter.org/username": "alice",
            "statefulset.kubernetes.io/pod-name": "jupyter-alice-0",
        },
    )
    sc.add_pod(
        "notebooks",
        "jupyter-carol-0",
        node="h100-train-2",
        start=_a5(T0 + 2 * D),
        gpus={"nvidia.com/gpu": 1},
        units=whole(sc, "h100-train-2", [5]),
        act="notebook",
        owner=("StatefulSet", "jupyter-carol"),
        container="notebook",
        image=IMG_NB,
        labels={"app": "jupyter", "team": "vision", "hub.jupyter.org/username": "carol"},
    )
    # ---------------------------------------------------------------- h100-train-3
    sc.add_pod(
        "sandbox",
        "bench-nccl-" + _hash5(sc, "nccl"),
        node="h100-train-3",
        start=_a5(T0 + 2 * D),
        gpus={"nvidia.com/gpu": 2},
        units=whole(sc, "h100-train-3", [4, 5]),
        act="eval",
        labels={"app": "nccl-tests"},
    )
    # deleted while running: disappears, hold ends at deletion
    sc.add_pod(
        "sandbox",
        "scratch-dave",
        node="h100-train-3",
        start=_a5(T0 + 1 * D),
        gpus={"nvidia.com/gpu": 2},
        units=whole(sc, "h100-train-3", [6, 7]),
        act="batch",
        deleted=_a5(T0 + 1 * D + 7 * H),
        deleted_running=True,
        labels={"app": "scratch", "user": "dave"},
    )
    # ---------------------------------------------------------------- a100-0 (cordoned from T0+1d)
    for i in range(2):
        rs = _rs(sc, "llama")
        p = f"llama-70b-{rs}-{_hash5(sc, 'llama', i)}"
        wl = add_workload(
            sc,
            "llm-serving",
            f"pod-{p}-{_hash5(sc, 'llamaw', i)}",
            "serving-lq",
            "serving-cq",
            "a100",
            1,
            2,
            created=T0 - 3 * D,
            admitted=T0 - 3 * D,
            owner=("Pod", p),
            cpu="24",
            memory="256Gi",
        )
        sc.add_pod(
            "llm-serving",
            p,
            node="a100-0",
            start=T0 - 3 * D,
            gpus={"nvidia.com/gpu": 2},
            units=whole(sc, "a100-0", [2 * i, 2 * i + 1]),
            act="infer",
            owner=("ReplicaSet", f"llama-70b-{rs}"),
            container="vllm",
            image=IMG_SERVE,
            labels={"app": "llama-70b", "pod-template-hash": rs},
            workload=wl,
            cpu="24",
            memory="256Gi",
        )
    sc.add_pod(
        "batch",
        "train-resnet-" + _hash5(sc, "rn"),
        node="a100-0",
        start=_a5(T0 + 2 * H),
        gpus={"nvidia.com/gpu": 4},
        units=whole(sc, "a100-0", range(4, 8)),
        act="batch",
        finish=_a5(T0 + 20 * H),
        end_phase="Succeeded",
        owner=("Job", "train-resnet"),
        labels={"job-name": "train-resnet"},
    )
    # ---------------------------------------------------------------- a100-mig-0
    MIGNODE = "a100-mig-0"
    sc.add_pod(
        "notebooks",
        "jupyter-bob-0",
        node=MIGNODE,
        start=_a5(T0 + 0.5 * D),
        gpus={"nvidia.com/mig-1g.10gb": 1},
        units=mig(sc, MIGNODE, 0, [7]),
        act="notebook_idle",
        active_until=_a5(T0 + 0.5 * D + 2 * H),
        owner=("StatefulSet", "jupyter-bob"),
        container="notebook",
        image=IMG_NB,
        labels={"app": "jupyter", "hub.jupyter.org/username": "bob"},
    )
    rs = _rs(sc, "embedder")
    for i, gi in enumerate([8, 9, 10]):
        sc.add_pod(
            "llm-serving",
            f"embedder-{rs}-{_hash5(sc, 'emb', i)}",
            node=MIGNODE,
            start=T0 - 5 * D,
            gpus={"nvidia.com/mig-1g.10gb": 1},
            units=mig(sc, MIGNODE, 0, [gi]),
            act="infer",
            owner=("ReplicaSet", f"embedder-{rs}"),
            container="server",
            image=IMG_TRITON,
            labels={"app": "embedder", "pod-template-hash": rs},
            cpu="4",
            memory="16Gi",
        )
    sc.add_pod(
        "llm-serving",
        "whisper-" + _rs(sc, "wh") + "-" + _hash5(sc, "wh"),
        node=MIGNODE,
        start=T0 - 1 * D,
        gpus={"nvidia.com/mig-3g.40gb": 1},
        units=mig(sc, MIGNODE, 1, [2]),
        act="infer",
        owner=("ReplicaSet", "whisper-" + _rs(sc, "wh")),
        container="server",
        image=IMG_TRITON,
        labels={"app": "whisper"},
    )
    sc.add_pod(
        "sandbox",
        "mig-smoke-" + _hash5(sc, "ms"),
        node=MIGNODE,
        start=_a5(T0 + 3 * D),
        gpus={"nvidia.com/mig-2g.20gb": 1},
        units=mig(sc, MIGNODE, 1, [3]),
        act="notebook",
        labels={"app": "mig-smoke"},
    )
    sc.add_pod(
        "ml-training",
        "ft-small-" + _hash5(sc, "fts"),
        node=MIGNODE,
        start=_a5(T0 + 1.5 * D),
        gpus={"nvidia.com/mig-4g.40gb": 1},
        units=mig(sc, MIGNODE, 2, [1]),
        act="train",
        finish=_a5(T0 + 4.5 * D),
        end_phase="Succeeded",
        owner=("Job", "ft-small"),
        labels={"job-name": "ft-small"},
    )
    sc.add_pod(
        "llm-serving",
        "mixtral-" + _rs(sc, "mx") + "-" + _hash5(sc, "mx"),
        node=MIGNODE,
        start=T0 - 2 * D,
        gpus={"nvidia.com/mig-7g.80gb": 1},
        units=mig(sc, MIGNODE, 3, [0]),
        act="infer",
        owner=("ReplicaSet", "mixtral-" + _rs(sc, "mx")),
        container="vllm",
        image=IMG_SERVE,
        labels={"app": "mixtral"},
    )
    sc.add_pod(
        "llm-serving",
        "reranker-" + _rs(sc, "rr") + "-" + _hash5(sc, "rr"),
        node=MIGNODE,
        start=T0 - 4 * D,
        gpus={"nvidia.com/gpu": 2},
        units=whole(sc, MIGNODE, [4, 5]),
        act="infer",
        owner=("ReplicaSet", "reranker-" + _rs(sc, "rr")),
        container="server",
        image=IMG_TRITON,
        labels={"app": "reranker"},
    )
    sc.add_pod(
        "batch",
        "feature-store-0",
        node=MIGNODE,
        start=T0 - 1 * D,
        gpus={"nvidia.com/gpu": 1},
        units=whole(sc, MIGNODE, [6]),
        act="batch",
        owner=("StatefulSet", "feature-store"),
        labels={"app": "feature-store"},
    )  # GPU 6 lost labels -> unmeasured
    # ---------------------------------------------------------------- h100-mig-0
    HM = "h100-mig-0"
    sc.add_pod(
        "notebooks",
        "jupyter-erin-0",
        node=HM,
        start=_a5(T0 + 2.5 * D),
        gpus={"nvidia.com/mig-1g.10gb": 1},
        units=mig(sc, HM, 0, [9]),
        act="notebook_idle",
        active_until=_a5(T0 + 2.5 * D + 30 * 60),
        owner=("StatefulSet", "jupyter-erin"),
        container="notebook",
        image=IMG_NB,
        labels={"app": "jupyter", "hub.jupyter.org/username": "erin"},
    )
    for g in range(3):
        sc.add_pod(
            "llm-serving",
            f"tts-{_rs(sc, 'tts')}-{_hash5(sc, 'tts', g)}",
            node=HM,
            start=T0 - 6 * D,
            gpus={"nvidia.com/mig-3g.40gb": 1},
            units=mig(sc, HM, g, [2]),
            act="infer",
            owner=("ReplicaSet", "tts-" + _rs(sc, "tts")),
            container="server",
            image=IMG_TRITON,
            labels={"app": "tts"},
        )
    sc.add_pod(
        "ml-training",
        "ddp-mig-" + _hash5(sc, "ddpmig"),
        node=HM,
        start=_a5(T0 + 5 * D),
        gpus={"nvidia.com/mig-1g.10gb": 2},
        units=mig(sc, HM, 1, [9, 10]),
        act="batch",
        finish=_a5(T0 + 5 * D + 9 * H),
        end_phase="Failed",
        xid=13,
        owner=("Job", "ddp-mig"),
        labels={"job-name": "ddp-mig"},
    )
    sc.add_pod(
        "sandbox",
        "mig-2g-test",
        node=HM,
        start=_a5(T0 + 1 * D),
        gpus={"nvidia.com/mig-2g.20gb": 1},
        units=mig(sc, HM, 3, [3]),
        act="notebook",
        labels={"app": "mig-test"},
    )
    # ---------------------------------------------------------------- l4-0 (whole)
    rs = _rs(sc, "asr")
    for i in range(2):
        sc.add_pod(
            "llm-serving",
            f"asr-{rs}-{_hash5(sc, 'asr', i)}",
            node="l4-0",
            start=T0 - 1 * D,
            gpus={"nvidia.com/gpu": 1},
            units=whole(sc, "l4-0", [i]),
            act="infer",
            owner=("ReplicaSet", f"asr-{rs}"),
            container="server",
            image=IMG_TRITON,
            labels={"app": "asr", "pod-template-hash": rs},
            cpu="8",
            memory="32Gi",
        )
    sc.add_pod(
        "notebooks",
        "jupyter-frank-0",
        node="l4-0",
        start=_a5(T0 + 3 * D + 5 * H),
        gpus={"nvidia.com/gpu": 1},
        units=whole(sc, "l4-0", [2]),
        act="notebook_idle",
        active_until=_a5(T0 + 3 * D + 7 * H),
        owner=("StatefulSet", "jupyter-frank"),
        container="notebook",
        image=IMG_NB,
        labels={"app": "jupyter", "hub.jupyter.org/username": "frank"},
        cpu="4",
        memory="16Gi",
    )
    # capacity-pending (group NVIDIA-L4 has 1 free GPU, pod wants 4)
    sc.add_pod(
        "batch",
        "l4-bulk-transcode-" + _hash5(sc, "l4b"),
        node=None,
        start=None,
        gpus={"nvidia.com/gpu": 4},
        created=T1 - 4 * H,
        node_selector={"nvidia.com/gpu.product": "NVIDIA-L4"},
        labels={"app": "transcode"},
        cpu="16",
        memory="64Gi",
        pending_message="0/11 nodes are available: 3 Insufficient nvidia.com/gpu, 8 node(s) didn't match "
        "Pod's node affinity/selector.",
    )
    # "other": nothing in the cluster matches its selector
    sc.add_pod(
        "sandbox",
        "needs-h200-" + _hash5(sc, "h200"),
        node=None,
        start=None,
        gpus={"nvidia.com/gpu": 1},
        created=T1 - 2 * H,
        node_selector={"nvidia.com/gpu.product": "NVIDIA-H200"},
        labels={"app": "h200-test"},
        cpu="8",
        memory="32Gi",
        pending_message="0/11 nodes are available: 11 node(s) didn't match Pod's node affinity/selector.",
    )
    # ---------------------------------------------------------------- l4-ts-0 (time-sliced, 4 replicas / GPU)
    rs = _rs(sc, "chat")
    for i, (g, r) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (3, 0)]):
        sc.add_pod(
            "llm-serving",
            f"chat-small-{rs}-{_hash5(sc, 'chat', i)}",
            node="l4-ts-0",
            start=T0 - 2 * D,
            gpus={"nvidia.com/gpu": 1},
            units=ts_unit(sc, "l4-ts-0", g, r),
            act="infer",
            owner=("ReplicaSet", f"chat-small-{rs}"),
            container="server",
            image=IMG_SERVE,
            labels={"app": "chat-small", "pod-template-hash": rs},
            cpu="4",
            memory="16Gi",
        )
    sc.add_pod(
        "notebooks",
        "jupyter-gina-0",
        node="l4-ts-0",
        start=_a5(T0 + 1 * D + 3 * H),
        gpus={"nvidia.com/gpu": 1},
        units=ts_unit(sc, "l4-ts-0", 2, 1),
        act="notebook_idle",
        active_until=_a5(T0 + 1 * D + 4 * H),
        owner=("StatefulSet", "jupyter-gina"),
        container="notebook",
        image=IMG_NB,
        labels={"app": "jupyter", "hub.jupyter.org/username": "gina"},
        cpu="2",
        memory="8Gi",
    )
    t = _a5(T0 + 1 * H)
    n = 0
    while t < T1 - 3 * H:
        dur = _a5(rng.uniform(1, 3) * H)
        sc.add_pod(
            "batch",
            f"thumbs-{n:03d}-{_hash5(sc, 'th', n)}",
            node="l4-ts-0",
            start=t,
            gpus={"nvidia.com/gpu": 1},
            units=ts_unit(sc, "l4-ts-0", 3, 1),
            act="batch",
            finish=t + dur,
            end_phase="Succeeded",
            owner=("Job", f"thumbs-{n:03d}"),
            labels={"job-name": f"thumbs-{n:03d}"},
            cpu="2",
            memory="8Gi",
        )
        n += 1
        t = _a5(t + dur + rng.uniform(2, 8) * H)
    # ---------------------------------------------------------------- l4-shared-0 (nvidia.com/gpu.shared)
    for i, (g, r) in enumerate([(0, 0), (0, 1), (1, 0)]):
        sc.add_pod(
            "sandbox",
            f"demo-app-{_rs(sc, 'demo')}-{_hash5(sc, 'demo', i)}",
            node="l4-shared-0",
            start=T0 - 1 * D,
            gpus={"nvidia.com/gpu.shared": 1},
            units=ts_unit(sc, "l4-shared-0", g, r),
            act="infer",
            owner=("ReplicaSet", "demo-app-" + _rs(sc, "demo")),
            container="app",
            labels={"app": "demo-app"},
            cpu="2",
            memory="8Gi",
        )


def build_tiny(sc: Scenario):
    """3 nodes x 8 H100 in pool 'tiny-pool'. At any t in the last 6 h:
    tiny-0 holds 4+1 GPUs (3 free), tiny-1 holds 6 (2 free), tiny-2 is cordoned and empty;
    a 4-GPU pod is pending (fragmentation)."""
    T0, T1 = sc.t0, sc.t1
    sc.add_namespace("team-a", {"team": "alpha"})
    for i in range(3):
        sc.add_node(
            f"tiny-{i}",
            "H100",
            8,
            {"karpenter.sh/nodepool": "tiny-pool"},
            instance_type="p5.48xlarge",
            unschedulable_from=(T0 - D if i == 2 else None),
        )
    sc.add_pod(
        "team-a",
        "a",
        node="tiny-0",
        start=T0,
        gpus={"nvidia.com/gpu": 4},
        units=whole(sc, "tiny-0", range(4)),
        act="train",
    )
    sc.add_pod(
        "team-a",
        "b",
        node="tiny-0",
        start=T0,
        gpus={"nvidia.com/gpu": 1},
        units=whole(sc, "tiny-0", [4]),
        act="notebook_idle",
        active_until=T0,
    )
    sc.add_pod(
        "team-a",
        "c",
        node="tiny-1",
        start=T0,
        gpus={"nvidia.com/gpu": 6},
        units=whole(sc, "tiny-1", range(6)),
        act="batch",
    )
    sc.add_pod(
        "team-a",
        "pending-4",
        node=None,
        start=None,
        gpus={"nvidia.com/gpu": 4},
        created=T1 - 6 * H,
        node_selector={"karpenter.sh/nodepool": "tiny-pool"},
        pending_message="0/3 nodes are available",
    )


def build_large(sc: Scenario):
    """1,250 nodes x 8 GPUs = 10,000 GPUs; sequential jobs per GPU block."""
    T0, T1 = sc.t0, sc.t1
    rng = random.Random(sc.seed * 104729 + 17)
    teams = [f"team-{i:02d}" for i in range(24)]
    for tm in teams:
        sc.add_namespace(tm, {"team": tm})
    sc.add_namespace("shared-infra")
    sc.add_namespace("kube-system")
    pools = (
        [("h100-a", "H100", "karpenter.sh/nodepool", "p5.48xlarge")] * 500
        + [("h100-b", "H100", "karpenter.sh/nodepool", "p5.48xlarge")] * 250
        + [("a100", "A100", "cloud.google.com/gke-nodepool", "a2-ultragpu-8g")] * 300
        + [("l40s", "L40S", None, "g6e.48xlarge")] * 200
    )
    kinds = ["train", "train", "batch", "batch", "infer", "infer", "eval", "notebook", "notebook_idle"]
    shapes = [[8], [8], [4, 4], [4, 2, 2], [2, 2, 2, 1, 1], [1] * 8]
    for i, (pool, model, key, itype) in enumerate(pools):
        name = f"gpu-{pool}-{i:04d}"
        labels = {key: pool} if key else {}
        node = sc.add_node(
            name,
            model,
            8,
            labels,
            instance_type=itype,
            unschedulable_from=(T0 + rng.uniform(0, 6) * D if rng.random() < 0.005 else None),
            zero_alloc=rng.random() < 0.003,
        )
        if node.zero_alloc:
            continue
        shape = rng.choice(shapes)
        g0 = 0
        for b, width in enumerate(shape):
            gpus = list(range(g0, g0 + width))
            g0 += width
            lost = rng.random() < 0.01
            if lost:
                for g in gpus:
                    sc.gpu_entity(name, g).labels_lost = True
            t = _a5(T0 - rng.uniform(0, 12) * H)
            n = 0
            while t < T1:
                if node.unschedulable_from is not None and t >= node.unschedulable_from:
                    break
                dur = _a5(rng.uniform(1.5, 30) * H) or SEG
                team = rng.choice(teams)
                act = rng.choice(kinds)
                finish = t + dur
                running = finish >= T1
                phase = None if running else ("Failed" if rng.random() < 0.1 else "Succeeded")
                pname = f"{act.replace('_', '-')}-{i:04d}-{b}-{n:03d}"
                sc.add_pod(
                    team,
                    pname,
                    node=name,
                    start=t,
                    gpus={"nvidia.com/gpu": width},
                    units=whole(sc, name, gpus),
                    act=act,
                    finish=None if running else finish,
                    end_phase=phase,
                    owner=("Job", pname),
                    labels={"job-name": pname},
                    active_until=t + 2 * H,
                    xid=(31 if phase == "Failed" else 0),
                )
                n += 1
                t = _a5(finish + rng.uniform(0, 4) * H)
                if rng.random() < 0.15:
                    t = _a5(t + rng.uniform(4, 24) * H)
    sc.flavors = [
        Flavor(p, {k: p})
        for p, k in (
            ("h100-a", "karpenter.sh/nodepool"),
            ("h100-b", "karpenter.sh/nodepool"),
            ("a100", "cloud.google.com/gke-nodepool"),
        )
    ]
    sc.cluster_queues = [
        ClusterQueue(f"{p}-cq", "fleet", [(p, {"nvidia.com/gpu": (n, None, None)})], {})
        for p, n in (("h100-a", 4000), ("h100-b", 2000), ("a100", 2400))
    ]
