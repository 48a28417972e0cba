"""The `demo` scenario as data: 64 GPUs on 12 nodes with every case the ledger, the capacity page and the
queues page know (whole, MIG, time-sliced and `gpu.shared` nodes, a cordoned node, a node without device
plugin, lost pod labels, an init-container GPU, idle notebooks, a pod deleted while running, pending work
of every reason, Kueue quota with borrowing).

Read by `devtools.simulator.builders.build_from_spec`, in order (positions feed the activity model):

* times: ``"T0+1d+3h"`` / ``"T1-6h"`` (T0/T1 = scenario start/end), floored to the 5-minute grid;
* names: ``{h5:a,b}`` a 5-character hash of the seed and the parts, ``{rs:a}`` a ReplicaSet hash,
  ``{i}`` the replica index, ``{n:03}`` the stream counter, ``{pod}`` the pod's own name (in its workload);
  a hash part ``i``/``n`` is that integer;
* units: ``{"whole": [gpu, ...], "ghost_from": k}``, ``{"mig": [gpu, [gi, ...]]}``, ``{"ts": [gpu, replica]}``;
* ``replicas``: one pod per item, the item's keys over the entry's;
* ``stream``: back-to-back runs of the entry, durations and gaps in hours drawn from the scenario's
  random generator (``fail_probability`` draws a failure per run; ``on_failure`` overrides keys).
"""

from __future__ import annotations

IMG_SERVE = "vllm/vllm-openai:v0.6.3"
IMG_NB = "quay.io/jupyter/pytorch-notebook:cuda12-2024-10-14"
IMG_TRITON = "nvcr.io/nvidia/tritonserver:24.05-py3"

GKE_A100 = {"cloud.google.com/gke-nodepool": "a100-pool", "cloud.google.com/gke-accelerator": "nvidia-a100-80gb"}
H100_BALANCED = [["3g.40gb", 2], ["2g.20gb", 3], ["1g.10gb", 9], ["1g.10gb", 10]]
H100_TRAIN_PENDING = (
    "0/11 nodes are available: 1 node(s) were unschedulable, 3 Insufficient nvidia.com/gpu, "
    "7 node(s) didn't match Pod's node affinity/selector. preemption: 0/11 nodes are "
    "available: 11 No preemption victims found for incoming pod."
)

SPEC = {
    "namespaces": {
        "ml-training": {"team": "research"},
        "notebooks": {"team": "research"},
        "llm-serving": {"team": "serving"},
        "batch": {"team": "data"},
        "sandbox": {},  # no team: unassigned
        "default": {},
        "kube-system": {},
        "gpu-operator": {},
        "kueue-system": {},
    },
    "nodes": [
        {
            "name": "h100-train-{i}",
            "count": 4,
            "model": "H100",
            "gpus": 8,
            "labels": {
                "karpenter.sh/nodepool": "h100-train",
                "karpenter.sh/capacity-type": "on-demand",
                "nvidia.com/gpu.clique": "sim-clique.0",
            },
            "instance_type": "p5.48xlarge",
            "cpu": "192",
            "memory": "2097152Mi",
        },
        {
            "name": "h100-mig-0",
            "model": "H100",
            "gpus": 4,
            "labels": {"karpenter.sh/nodepool": "h100-mig", "karpenter.sh/capacity-type": "on-demand"},
            "kind": "mig",
            "mig_layout": [H100_BALANCED] * 4,
            "instance_type": "p5.48xlarge",
            "cpu": "96",
            "memory": "1048576Mi",
        },
        {
            "name": "a100-0",
            "model": "A100",
            "gpus": 8,
            "labels": GKE_A100,
            "instance_type": "a2-ultragpu-8g",
            "cpu": "96",
            "memory": "1392640Mi",
            "zone": "us-central1-a",
            "unschedulable_from": "T0+1d",
        },
        {
            "name": "a100-mig-0",
            "model": "A100",
            "gpus": 8,
            "labels": GKE_A100,
            "kind": "mig",
            "mig_layout": [
                [["1g.10gb", 7], ["1g.10gb", 8], ["1g.10gb", 9], ["1g.10gb", 10], ["1g.10gb", 11], ["1g.10gb", 12],
                 ["1g.10gb", 13]],
                [["3g.40gb", 2], ["2g.20gb", 3], ["2g.20gb", 4]],
                [["4g.40gb", 1], ["3g.40gb", 2]],
                [["7g.80gb", 0]],
            ],
            "instance_type": "a2-ultragpu-8g",
            "cpu": "96",
            "memory": "1392640Mi",
            "zone": "us-central1-a",
        },
        {"name": "l4-0", "model": "L4", "gpus": 4, "instance_type": "g2-standard-48", "cpu": "48",
         "memory": "196608Mi", "zone": "us-central1-b"},
        {"name": "l4-ts-0", "model": "L4", "gpus": 4, "kind": "timesliced", "replicas": 4,
         "instance_type": "g2-standard-48", "cpu": "48", "memory": "196608Mi", "zone": "us-central1-b"},
        {"name": "l4-shared-0", "model": "L4", "gpus": 2, "kind": "shared", "replicas": 4,
         "shared_resource": "nvidia.com/gpu.shared", "instance_type": "g2-standard-24", "cpu": "24",
         "memory": "98304Mi", "zone": "us-central1-b"},
        {"name": "l4-noplugin-0", "model": "L4", "gpus": 2, "kind": "noplugin", "zero_alloc": True,
         "instance_type": "g2-standard-24", "cpu": "24", "memory": "98304Mi", "zone": "us-central1-b"},
        {"name": "cpu-0", "model": "", "gpus": 0, "labels": {"karpenter.sh/nodepool": "general"}, "kind": "cpu",
         "instance_type": "m7i.8xlarge", "cpu": "32", "memory": "131072Mi"},
    ],
    "queues": {
        "flavors": [
            {"name": "h100", "node_labels": {"karpenter.sh/nodepool": "h100-train"}},
            {"name": "a100", "node_labels": {"cloud.google.com/gke-nodepool": "a100-pool"}},
            {"name": "l4", "node_labels": {"nvidia.com/gpu.product": "NVIDIA-L4"}},
        ],
        # resource: (nominal, borrowing limit, lending limit)
        "cluster_queues": [
            {
                "name": "research-cq",
                "cohort": "gpu-cohort",
                "flavors": [["h100", {"cpu": [384, 192, None], "memory": ["4Ti", "2Ti", None],
                                      "nvidia.com/gpu": [16, 8, 4]}]],
                "namespace_selector": {"matchLabels": {"team": "research"}},
            },
            {
                "name": "data-cq",
                "cohort": "gpu-cohort",
                "flavors": [["h100", {"cpu": [192, 0, 96], "memory": ["2Ti", "0", "1Ti"],
                                      "nvidia.com/gpu": [8, 0, 4]}]],
                "namespace_selector": {"matchLabels": {"team": "data"}},
            },
            {
                "name": "platform-cq",
                "cohort": "gpu-cohort",
                "flavors": [["h100", {"cpu": [192, None, None], "memory": ["2Ti", None, None],
                                      "nvidia.com/gpu": [8, None, 8]}]],
            },
            {
                "name": "serving-cq",
                "cohort": "gpu-cohort",
                "flavors": [
                    ["a100", {"cpu": [96, None, 24], "memory": ["1Ti", None, "256Gi"], "nvidia.com/gpu": [8, None, 2]}],
                    ["l4", {"cpu": [48, None, None], "memory": ["192Gi", None, None],
                            "nvidia.com/gpu": [4, None, None]}],
                ],
                "namespace_selector": {"matchLabels": {"team": "serving"}},
            },
        ],
        "local_queues": [
            {"namespace": "ml-training", "name": "research-lq", "cluster_queue": "research-cq"},
            {"namespace": "batch", "name": "data-lq", "cluster_queue": "data-cq"},
            {"namespace": "llm-serving", "name": "serving-lq", "cluster_queue": "serving-cq"},
            {"namespace": "sandbox", "name": "platform-lq", "cluster_queue": "platform-cq"},
        ],
    },
    # series of these GPUs never carry pod identity (unmeasured)
    "labels_lost": [["a100-mig-0", 6]],
    # Health events (the findings' truth: tests/oracle/findings.py expected_findings). All but the row remap failure sit
    # in T0+19h..T0+1d+23h: mid-week in a 7-day demo, and within the last day of a 2-day one (the collection
    # tests' window), never in the last hours the Prometheus comparisons read.
    "health": [
        # a100-0 GPU 6: row remapping failed (XID 64) under train-resnet; never repaired (a100-0 is cordoned later)
        {"node": "a100-0", "gpu": 6, "xid": 64, "from": "T0+19h+30m", "until": "T0+19h+35m"},
        {"node": "a100-0", "gpu": 6, "remap_failure": True, "from": "T0+19h+30m"},
        # a100-mig-0 GPU 5 (reranker): one double-bit ECC error (XID 48 for one 5-minute sample), its row remapped
        {"node": "a100-mig-0", "gpu": 5, "xid": 48, "from": "T0+1d+11h+20m", "until": "T0+1d+11h+25m"},
        {"node": "a100-mig-0", "gpu": 5, "counter": "ecc_dbe", "increment": 1, "from": "T0+1d+11h+20m"},
        {"node": "a100-mig-0", "gpu": 5, "counter": "remap_uncorrectable", "increment": 1, "from": "T0+1d+11h+20m"},
        # a100-mig-0 GPU 4 (reranker): rows remapped for correctable errors: healthy, no finding
        {"node": "a100-mig-0", "gpu": 4, "counter": "remap_correctable", "increment": 2, "from": "T0+1d+13h+40m"},
        # h100-train-2 GPU 7 under embed-shards' shard 1: XID 79 (fell off the bus) for an hour, then no series
        # at all for 5 h while the node stays Ready (the shard hangs on it 2 h more, then fails)
        {"node": "h100-train-2", "gpu": 7, "xid": 79, "from": "T0+1d+14h", "until": "T0+1d+15h"},
        {"node": "h100-train-2", "gpu": 7, "vanish": True, "from": "T0+1d+15h", "until": "T0+1d+20h"},
        # l4-0 GPU 3: busy for 4 h with no pod holding it (a process outside the device plugin's accounting)
        {"node": "l4-0", "gpu": 3, "rogue": True, "from": "T0+1d+9h", "until": "T0+1d+13h"},
        # h100-train-0 (llm-pretrain rank 0): 3 h of HW power brake. (h100-train-1, rank 1, is thermally
        # throttled while llm-pretrain holds it: train_throttled.)
        *({"node": "h100-train-0", "gpu": g, "clock_events": ["hw_slowdown", "hw_power_brake"],
           "from": "T0+1d+16h", "until": "T0+1d+19h"} for g in range(8)),
    ],
    "workloads": [
        # ---------------------------------------------------------------- training (distributed, research-cq)
        {
            "kind": "job", "namespace": "ml-training", "base": "llm-pretrain", "queue": "research-lq",
            "cluster_queue": "research-cq", "flavor": "h100", "gpus": 8, "start": "T0-2d",
            "placements": [
                {"node": "h100-train-0", "units": {"whole": [0, 1, 2, 3, 4, 5, 6, 7]}},
                {"node": "h100-train-1", "units": {"whole": [0, 1, 2, 3, 4, 5, 6, 7]}},
            ],
            "acts": ["train", "train_throttled"], "container": "pytorch",
            "labels": {"training.kubeflow.org/job-role": "worker"}, "cpu": "96", "memory": "1024Gi",
        },
        {
            "kind": "job", "namespace": "ml-training", "base": "eval-sweep", "queue": "research-lq",
            "cluster_queue": "research-cq", "flavor": "h100", "gpus": 4, "start": "T0+3d",
            "placements": [{"node": "h100-train-3", "units": {"whole": [0, 1, 2, 3]}}],
            "act": "eval", "cpu": "32", "memory": "256Gi",
        },
        # fragmentation-pending 4-GPU finetune (admitted by Kueue, unschedulable)
        {
            "kind": "job", "namespace": "ml-training", "base": "finetune-4gpu", "queue": "research-lq",
            "cluster_queue": "research-cq", "flavor": "h100", "gpus": 4, "start": None, "created": "T1-6h",
            "placements": [None], "pending_pods": True,
            "node_selector": {"karpenter.sh/nodepool": "h100-train"}, "pending_message": H100_TRAIN_PENDING,
            "cpu": "32", "memory": "256Gi",
        },
        # quota-pending workloads (no pods: Job suspended by Kueue)
        {
            "kind": "workload", "namespace": "ml-training", "name": "job-llm-sweep-{h5:sweep}-{h5:sweepw}",
            "queue": "research-lq", "cluster_queue": "research-cq", "flavor": "h100", "count": 1, "gpus": 8,
            "created": "T1-5h", "owner": ["Job", "llm-sweep-{h5:sweep}"],
            "pending_message": "couldn't assign flavors to pod set main: insufficient unused quota for "
            "nvidia.com/gpu in flavor h100, 8 more needed",
            "cpu": "32", "memory": "256Gi",
        },
        {
            "kind": "workload", "namespace": "batch", "name": "job-backfill-{h5:bf}-{h5:bfw}",
            "queue": "data-lq", "cluster_queue": "data-cq", "flavor": "h100", "count": 2, "gpus": 4,
            "created": "T1-3h", "owner": ["Job", "backfill-{h5:bf}"],
            "pending_message": "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu "
            "in flavor h100, request > maximum capacity",
            "cpu": "16", "memory": "128Gi",
        },
        # init-container pod: init requests 2 GPUs, app 1 -> effective 2; second GPU never attributed
        {
            "kind": "pod", "namespace": "ml-training", "name": "data-prep-{h5:dp}", "node": "h100-train-2",
            "start": "T0+4d+2h", "finish": "T0+4d+5h", "end_phase": "Succeeded",
            "gpus": {"nvidia.com/gpu": 1}, "init_gpus": {"nvidia.com/gpu": 2},
            "units": {"whole": [6, 7], "ghost_from": 1}, "act": "batch",
            "owner": ["Job", "data-prep"], "labels": {"job-name": "data-prep"},
        },
        # ---------------------------------------------------------------- h100-train-2: data batch stream
        {
            "kind": "job", "namespace": "batch", "base": "etl-embed-{n:03}", "queue": "data-lq",
            "cluster_queue": "data-cq", "flavor": "h100", "gpus": 4,
            "placements": [{"node": "h100-train-2", "units": {"whole": [0, 1, 2, 3]}}], "act": "batch",
            "stream": {"from": "T0+30m", "must_end_by": "T1-10h", "hours": [1, 4], "gap_hours": [0.5, 2.5],
                       "fail_probability": 0.3},
            "on_failure": {"phase": "Failed", "xid": 43},
        },
        {
            "kind": "job", "namespace": "batch", "base": "reindex-long", "queue": "data-lq",
            "cluster_queue": "data-cq", "flavor": "h100", "gpus": 4, "start": "T1-10h",
            "placements": [{"node": "h100-train-2", "units": {"whole": [0, 1, 2, 3]}}], "act": "batch",
        },
        # notebooks on h100-train-2 GPU 4 (idle for hours) and GPU 5 (team override via pod label)
        {
            "kind": "pod", "namespace": "notebooks", "name": "jupyter-alice-0", "node": "h100-train-2",
            "start": "T0+1d", "gpus": {"nvidia.com/gpu": 1}, "units": {"whole": [4]},
            "act": "notebook_idle", "active_until": "T0+1d+1h", "owner": ["StatefulSet", "jupyter-alice"],
            "container": "notebook", "image": IMG_NB,
            "labels": {"app": "jupyter", "hub.jupyter.org/username": "alice",
                       "statefulset.kubernetes.io/pod-name": "jupyter-alice-0"},
        },
        {
            "kind": "pod", "namespace": "notebooks", "name": "jupyter-carol-0", "node": "h100-train-2",
            "start": "T0+2d", "gpus": {"nvidia.com/gpu": 1}, "units": {"whole": [5]}, "act": "notebook",
            "owner": ["StatefulSet", "jupyter-carol"], "container": "notebook", "image": IMG_NB,
            "labels": {"app": "jupyter", "team": "vision", "hub.jupyter.org/username": "carol"},
        },
        # ---------------------------------------------------------------- h100-train-3
        {
            "kind": "pod", "namespace": "sandbox", "name": "bench-nccl-{h5:nccl}", "node": "h100-train-3",
            "start": "T0+2d", "gpus": {"nvidia.com/gpu": 2}, "units": {"whole": [4, 5]}, "act": "eval",
            "labels": {"app": "nccl-tests"},
        },
        # deleted while running: disappears, hold ends at deletion
        {
            "kind": "pod", "namespace": "sandbox", "name": "scratch-dave", "node": "h100-train-3",
            "start": "T0+1d", "gpus": {"nvidia.com/gpu": 2}, "units": {"whole": [6, 7]}, "act": "batch",
            "deleted": "T0+1d+7h", "deleted_running": True, "labels": {"app": "scratch", "user": "dave"},
        },
        # ---------------------------------------------------------------- a100-0 (cordoned from T0+1d)
        {
            # A LeaderWorkerSet (kubernetes-sigs/lws, docs/examples/vllm): one group of two, the leader pod
            # owned by the StatefulSet llama-70b (the LWS's), the worker by the StatefulSet llama-70b-0, owned by
            # the leader pod. Workload: LeaderWorkerSet/llama-70b.
            "kind": "pod", "namespace": "llm-serving", "name": "llama-70b-0", "node": "a100-0",
            "start": "T0-3d", "gpus": {"nvidia.com/gpu": 2}, "act": "infer",
            "replicas": [
                {"units": {"whole": [0, 1]}, "owner": ["StatefulSet", "llama-70b", "LeaderWorkerSet", "llama-70b"],
                 "labels": {"leaderworkerset.sigs.k8s.io/name": "llama-70b", "role": "leader",
                            "leaderworkerset.sigs.k8s.io/group-index": "0",
                            "leaderworkerset.sigs.k8s.io/worker-index": "0",
                            "statefulset.kubernetes.io/pod-name": "llama-70b-0"}},
                {"units": {"whole": [2, 3]}, "name": "llama-70b-0-1",
                 "owner": ["StatefulSet", "llama-70b-0", "Pod", "llama-70b-0"],
                 "labels": {"leaderworkerset.sigs.k8s.io/name": "llama-70b",
                            "leaderworkerset.sigs.k8s.io/group-index": "0",
                            "leaderworkerset.sigs.k8s.io/worker-index": "1",
                            "statefulset.kubernetes.io/pod-name": "llama-70b-0-1"}},
            ],
            "container": "vllm", "image": IMG_SERVE, "cpu": "24", "memory": "256Gi",
            "workload": {
                "namespace": "llm-serving", "name": "pod-{pod}-{h5:llamaw,i}", "queue": "serving-lq",
                "cluster_queue": "serving-cq", "flavor": "a100", "count": 1, "gpus": 2, "created": "T0-3d",
                "admitted": "T0-3d", "owner": ["Pod", "{pod}"], "cpu": "24", "memory": "256Gi",
            },
        },
        {
            "kind": "pod", "namespace": "batch", "name": "train-resnet-{h5:rn}", "node": "a100-0",
            "start": "T0+2h", "finish": "T0+20h", "end_phase": "Succeeded", "gpus": {"nvidia.com/gpu": 4},
            "units": {"whole": [4, 5, 6, 7]}, "act": "batch", "owner": ["Job", "train-resnet"],
            "labels": {"job-name": "train-resnet"},
        },
        # ---------------------------------------------------------------- a100-mig-0
        {
            "kind": "pod", "namespace": "notebooks", "name": "jupyter-bob-0", "node": "a100-mig-0",
            "start": "T0+12h", "gpus": {"nvidia.com/mig-1g.10gb": 1}, "units": {"mig": [0, [7]]},
            "act": "notebook_idle", "active_until": "T0+14h", "owner": ["StatefulSet", "jupyter-bob"],
            "container": "notebook", "image": IMG_NB,
            "labels": {"app": "jupyter", "hub.jupyter.org/username": "bob"},
        },
        {
            "kind": "pod", "namespace": "llm-serving", "name": "embedder-{rs:embedder}-{h5:emb,i}",
            "node": "a100-mig-0", "start": "T0-5d", "gpus": {"nvidia.com/mig-1g.10gb": 1}, "act": "infer",
            "replicas": [{"units": {"mig": [0, [8]]}}, {"units": {"mig": [0, [9]]}}, {"units": {"mig": [0, [10]]}}],
            "owner": ["ReplicaSet", "embedder-{rs:embedder}", "Deployment", "embedder"],
            "container": "server", "image": IMG_TRITON,
            "labels": {"app": "embedder", "pod-template-hash": "{rs:embedder}"}, "cpu": "4", "memory": "16Gi",
        },
        # over-provisioned: its peaks fit a 2g.20gb instance (the savings' right-sizing)
        {
            "kind": "pod", "namespace": "llm-serving", "name": "whisper-{rs:wh}-{h5:wh}", "node": "a100-mig-0",
            "start": "T0-1d", "gpus": {"nvidia.com/mig-3g.40gb": 1}, "units": {"mig": [1, [2]]}, "act": "infer_light",
            "owner": ["ReplicaSet", "whisper-{rs:wh}", "Deployment", "whisper"],
            "container": "server", "image": IMG_TRITON,
            "labels": {"app": "whisper"},
        },
        {
            "kind": "pod", "namespace": "sandbox", "name": "mig-smoke-{h5:ms}", "node": "a100-mig-0",
            "start": "T0+3d", "gpus": {"nvidia.com/mig-2g.20gb": 1}, "units": {"mig": [1, [3]]},
            "act": "notebook", "labels": {"app": "mig-smoke"},
        },
        {
            "kind": "pod", "namespace": "ml-training", "name": "ft-small-{h5:fts}", "node": "a100-mig-0",
            "start": "T0+1d+12h", "finish": "T0+4d+12h", "end_phase": "Succeeded",
            "gpus": {"nvidia.com/mig-4g.40gb": 1}, "units": {"mig": [2, [1]]}, "act": "train",
            "owner": ["Job", "ft-small"], "labels": {"job-name": "ft-small"},
        },
        {
            "kind": "pod", "namespace": "llm-serving", "name": "mixtral-{rs:mx}-{h5:mx}", "node": "a100-mig-0",
            "start": "T0-2d", "gpus": {"nvidia.com/mig-7g.80gb": 1}, "units": {"mig": [3, [0]]}, "act": "infer",
            "owner": ["ReplicaSet", "mixtral-{rs:mx}", "Deployment", "mixtral"],
            "container": "vllm", "image": IMG_SERVE,
            "labels": {"app": "mixtral"},
        },
        {
            "kind": "pod", "namespace": "llm-serving", "name": "reranker-{rs:rr}-{h5:rr}", "node": "a100-mig-0",
            "start": "T0-4d", "gpus": {"nvidia.com/gpu": 2}, "units": {"whole": [4, 5]}, "act": "infer",
            "owner": ["ReplicaSet", "reranker-{rs:rr}", "Deployment", "reranker"],
            "container": "server", "image": IMG_TRITON,
            "labels": {"app": "reranker"},
        },
        # on GPU 6, whose series lost their pod labels: unmeasured
        {
            "kind": "pod", "namespace": "batch", "name": "feature-store-0", "node": "a100-mig-0",
            "start": "T0-1d", "gpus": {"nvidia.com/gpu": 1}, "units": {"whole": [6]}, "act": "batch",
            "owner": ["StatefulSet", "feature-store"], "labels": {"app": "feature-store"},
        },
        # ---------------------------------------------------------------- h100-mig-0
        {
            "kind": "pod", "namespace": "notebooks", "name": "jupyter-erin-0", "node": "h100-mig-0",
            "start": "T0+2d+12h", "gpus": {"nvidia.com/mig-1g.10gb": 1}, "units": {"mig": [0, [9]]},
            "act": "notebook_idle", "active_until": "T0+2d+12h+30m", "owner": ["StatefulSet", "jupyter-erin"],
            "container": "notebook", "image": IMG_NB,
            "labels": {"app": "jupyter", "hub.jupyter.org/username": "erin"},
        },
        {
            "kind": "pod", "namespace": "llm-serving", "name": "tts-{rs:tts}-{h5:tts,i}", "node": "h100-mig-0",
            "start": "T0-6d", "gpus": {"nvidia.com/mig-3g.40gb": 1}, "act": "infer",
            "replicas": [{"units": {"mig": [0, [2]]}}, {"units": {"mig": [1, [2]]}}, {"units": {"mig": [2, [2]]}}],
            "owner": ["ReplicaSet", "tts-{rs:tts}", "Deployment", "tts"],
            "container": "server", "image": IMG_TRITON,
            "labels": {"app": "tts"},
        },
        {
            "kind": "pod", "namespace": "ml-training", "name": "ddp-mig-{h5:ddpmig}", "node": "h100-mig-0",
            "start": "T0+5d", "finish": "T0+5d+9h", "end_phase": "Failed", "xid": 13,
            "gpus": {"nvidia.com/mig-1g.10gb": 2}, "units": {"mig": [1, [9, 10]]}, "act": "batch",
            "owner": ["Job", "ddp-mig"], "labels": {"job-name": "ddp-mig"},
        },
        {
            "kind": "pod", "namespace": "sandbox", "name": "mig-2g-test", "node": "h100-mig-0",
            "start": "T0+1d", "gpus": {"nvidia.com/mig-2g.20gb": 1}, "units": {"mig": [3, [3]]},
            "act": "notebook", "labels": {"app": "mig-test"},
        },
        # ---------------------------------------------------------------- l4-0 (whole)
        {
            "kind": "pod", "namespace": "llm-serving", "name": "asr-{rs:asr}-{h5:asr,i}", "node": "l4-0",
            "start": "T0-1d", "gpus": {"nvidia.com/gpu": 1}, "act": "infer",
            "replicas": [{"units": {"whole": [0]}}, {"units": {"whole": [1]}}],
            "owner": ["ReplicaSet", "asr-{rs:asr}", "Deployment", "asr"],
            "container": "server", "image": IMG_TRITON,
            "labels": {"app": "asr", "pod-template-hash": "{rs:asr}"}, "cpu": "8", "memory": "32Gi",
        },
        {
            "kind": "pod", "namespace": "notebooks", "name": "jupyter-frank-0", "node": "l4-0",
            "start": "T0+3d+5h", "gpus": {"nvidia.com/gpu": 1}, "units": {"whole": [2]},
            "act": "notebook_idle", "active_until": "T0+3d+7h", "owner": ["StatefulSet", "jupyter-frank"],
            "container": "notebook", "image": IMG_NB,
            "labels": {"app": "jupyter", "hub.jupyter.org/username": "frank"}, "cpu": "4", "memory": "16Gi",
        },
        # capacity-pending (group NVIDIA-L4 has 1 free GPU, pod wants 4)
        {
            "kind": "pod", "namespace": "batch", "name": "l4-bulk-transcode-{h5:l4b}", "node": None, "start": None,
            "gpus": {"nvidia.com/gpu": 4}, "created": "T1-4h",
            "node_selector": {"nvidia.com/gpu.product": "NVIDIA-L4"}, "labels": {"app": "transcode"},
            "cpu": "16", "memory": "64Gi",
            "pending_message": "0/11 nodes are available: 3 Insufficient nvidia.com/gpu, 8 node(s) didn't match "
            "Pod's node affinity/selector.",
        },
        # "other": nothing in the cluster matches its selector
        {
            "kind": "pod", "namespace": "sandbox", "name": "needs-h200-{h5:h200}", "node": None, "start": None,
            "gpus": {"nvidia.com/gpu": 1}, "created": "T1-2h",
            "node_selector": {"nvidia.com/gpu.product": "NVIDIA-H200"}, "labels": {"app": "h200-test"},
            "cpu": "8", "memory": "32Gi",
            "pending_message": "0/11 nodes are available: 11 node(s) didn't match Pod's node affinity/selector.",
        },
        # ---------------------------------------------------------------- l4-ts-0 (time-sliced, 4 replicas / GPU)
        {
            "kind": "pod", "namespace": "llm-serving", "name": "chat-small-{rs:chat}-{h5:chat,i}", "node": "l4-ts-0",
            "start": "T0-2d", "gpus": {"nvidia.com/gpu": 1}, "act": "infer",
            "replicas": [{"units": {"ts": gr}} for gr in ([0, 0], [0, 1], [1, 0], [1, 1], [2, 0], [3, 0])],
            "owner": ["ReplicaSet", "chat-small-{rs:chat}", "Deployment", "chat-small"],
            "container": "server", "image": IMG_SERVE,
            "labels": {"app": "chat-small", "pod-template-hash": "{rs:chat}"}, "cpu": "4", "memory": "16Gi",
        },
        {
            "kind": "pod", "namespace": "notebooks", "name": "jupyter-gina-0", "node": "l4-ts-0",
            "start": "T0+1d+3h", "gpus": {"nvidia.com/gpu": 1}, "units": {"ts": [2, 1]},
            "act": "notebook_idle", "active_until": "T0+1d+4h", "owner": ["StatefulSet", "jupyter-gina"],
            "container": "notebook", "image": IMG_NB,
            "labels": {"app": "jupyter", "hub.jupyter.org/username": "gina"}, "cpu": "2", "memory": "8Gi",
        },
        {
            "kind": "pod", "namespace": "batch", "name": "thumbs-{n:03}-{h5:th,n}", "node": "l4-ts-0",
            "gpus": {"nvidia.com/gpu": 1}, "units": {"ts": [3, 1]}, "act": "batch", "end_phase": "Succeeded",
            "owner": ["Job", "thumbs-{n:03}", "CronJob", "thumbs"], "labels": {"job-name": "thumbs-{n:03}"},
            "cpu": "2", "memory": "8Gi",
            "stream": {"from": "T0+1h", "starts_before": "T1-3h", "hours": [1, 3], "gap_hours": [2, 8]},
        },
        # ---------------------------------------------------------------- l4-shared-0 (nvidia.com/gpu.shared)
        {
            "kind": "pod", "namespace": "sandbox", "name": "demo-app-{rs:demo}-{h5:demo,i}", "node": "l4-shared-0",
            "start": "T0-1d", "gpus": {"nvidia.com/gpu.shared": 1}, "act": "infer",
            "replicas": [{"units": {"ts": gr}} for gr in ([0, 0], [0, 1], [1, 0])],
            "owner": ["ReplicaSet", "demo-app-{rs:demo}", "Deployment", "demo-app"],
            "container": "app", "labels": {"app": "demo-app"},
            "cpu": "2", "memory": "8Gi",
        },
            # ---------------------------------------------------------------- owners of every kind, health stories
        # (appended: pod positions feed the activity model, so the pods above keep their activity)
        # A PyTorchJob on h100-train-3 (2 pods x 4 GPUs): its worker's third GPU straggles at ~40 % for 5 h
        # while the seven others run at ~90 %.
        {
            "kind": "pod", "namespace": "ml-training", "node": "h100-train-3", "gpus": {"nvidia.com/gpu": 4},
            "start": "T0+1d+8h", "finish": "T0+1d+23h", "end_phase": "Succeeded", "act": "train_fast",
            "owner": ["PyTorchJob", "llama-sft"], "container": "pytorch", "cpu": "48", "memory": "512Gi",
            "replicas": [
                {"name": "llama-sft-master-0", "units": {"whole": [0, 1, 2, 3]},
                 "labels": {"training.kubeflow.org/job-name": "llama-sft",
                            "training.kubeflow.org/operator-name": "pytorchjob-controller",
                            "training.kubeflow.org/replica-type": "master",
                            "training.kubeflow.org/replica-index": "0",
                            "training.kubeflow.org/job-role": "master"}},
                {"name": "llama-sft-worker-0", "units": {"whole": [4, 5, 6, 7]},
                 "labels": {"training.kubeflow.org/job-name": "llama-sft",
                            "training.kubeflow.org/operator-name": "pytorchjob-controller",
                            "training.kubeflow.org/replica-type": "worker",
                            "training.kubeflow.org/replica-index": "0"},
                 "overrides": [{"unit": 2, "from": "T0+1d+12h", "until": "T0+1d+17h", "act": "straggler"}]},
            ],
        },
        # A JobSet of two 1-GPU Jobs on h100-train-2; shard 1 runs on the GPU that falls off the bus (health).
        {
            "kind": "pod", "namespace": "batch", "name": "embed-shards-shard-{i}-0-{h5:es,i}", "node": "h100-train-2",
            "gpus": {"nvidia.com/gpu": 1}, "start": "T0+1d+10h", "act": "batch",
            "owner": ["Job", "embed-shards-shard-{i}", "JobSet", "embed-shards"], "cpu": "8", "memory": "64Gi",
            "labels": {"jobset.sigs.k8s.io/jobset-name": "embed-shards",
                       "jobset.sigs.k8s.io/replicatedjob-name": "shard", "jobset.sigs.k8s.io/job-index": "{i}",
                       "batch.kubernetes.io/job-name": "embed-shards-shard-{i}", "job-name": "embed-shards-shard-{i}",
                       "batch.kubernetes.io/job-completion-index": "0"},
            "replicas": [
                {"units": {"whole": [6]}, "finish": "T0+1d+18h", "end_phase": "Succeeded"},
                {"units": {"whole": [7]}, "finish": "T0+1d+17h", "end_phase": "Failed"},
            ],
        },
        # A notebook that keeps a model in GPU memory (~45 GiB) and computes nothing for 11 h: idle-held.
        {
            "kind": "pod", "namespace": "notebooks", "name": "jupyter-hana-0", "node": "h100-train-2",
            "start": "T0+1d+6h", "gpus": {"nvidia.com/gpu": 1}, "units": {"whole": [5]}, "act": "notebook_held",
            "active_until": "T0+1d+9h", "deleted": "T0+1d+20h", "deleted_running": True,
            "owner": ["StatefulSet", "jupyter-hana"], "container": "notebook", "image": IMG_NB,
            "labels": {"app": "jupyter", "hub.jupyter.org/username": "hana",
                       "statefulset.kubernetes.io/pod-name": "jupyter-hana-0"},
        },
        # Over-provisioned onto an expensive model: a light OCR service on a whole A100 80GB of a100-mig-0 (GPU 7, free
        # otherwise) whose peaks (about 25 % busy, about 17-19 GiB) fit a whole L4 of l4-0's group, which the price card
        # prices lower; a MIG 3g.40gb of the same A100 would fit too but saves less (the savings' cheaper model).
        {
            "kind": "pod", "namespace": "llm-serving", "name": "ocr-{rs:ocr}-{h5:ocr}", "node": "a100-mig-0",
            "start": "T0-1d", "gpus": {"nvidia.com/gpu": 1}, "units": {"whole": [7]}, "act": "infer_light",
            "owner": ["ReplicaSet", "ocr-{rs:ocr}", "Deployment", "ocr"], "container": "server", "image": IMG_TRITON,
            "labels": {"app": "ocr"}, "cpu": "8", "memory": "32Gi",
        },
    ],
}
