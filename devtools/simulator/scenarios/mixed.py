"""The `mixed` scenario: one cluster handing GPUs out every way (device plugin whole GPUs, MIG mixed, time-slicing,
DRA whole GPUs, DRA MIG, HAMi fractions), generated; and what the demo's DRA switch adds to the demo.

Every case of ledger.md "GPUs handed out by claims (DRA) and by fractions (HAMi)" happens within the last 30 hours
(times count back from the end), so a collection of the last day sees them all:

* dra-h100-0 (8 H100, GFD labels kept): a 4-GPU training pod from a template, a 2-replica Deployment from a
  one-GPU template, the named claim ``shared-h100`` consumed by a `serving` pod and, for 5.5 h of it, a
  `research` pod of the same namespace; a monitoring pod whose admin-access claim spans every GPU and holds
  nothing; with `resource.k8s.io/v1`, a pod asking ``nvidia.com/gpu: 1`` served by an extended-resource claim.
* dra-h100-1: the named claim ``reserved-h100-pair`` (2 GPUs) consumed for 14 h, then allocated with no consumer
  for 7 h (idle claim); back-to-back one-GPU runs (claims generated and deleted with their pods); a 4-GPU job
  that fails; a ComputeDomain slice beside its GPUs.
* dra-mig-0 (4 A100 on AKS, no GFD labels): GPU 0 in MIG mode publishing its whole device too, GPU 1 in MIG mode
  (6 of 7 slices), GPUs 2 and 3 whole; MIG claims of one and two requests (one container per request).
* hami-l4-0 (2 L4, comma register, GFD labels): cores-and-memory, memory-only (with a sidecar), percentage and
  two-GPU tenants. hami-a100-0 (2 A100, JSON register, no GFD and no pool label, devcore 200): three tenants at
  50 % cores on GPU 0 (oversubscribed while all three run), one exclusive tenant on GPU 1.

Variants (scenario names): ``mixed`` (v1, exporter with DRA attribution), ``mixed-v1beta1`` (DRA served only as
``resource.k8s.io/v1beta1``: no extended-resource pod, the DeviceClass maps no extended resource there),
``mixed-noattr`` (v1, dcgm-exporter without ``KUBERNETES_ENABLE_DRA``: DRA devices' series carry no pod).
"""

from __future__ import annotations

from ..builders import H, mig, ts_unit, whole
from ..dra import (
    GPU_CLASS,
    MIG_CLASS,
    Request,
    add_claim,
    add_compute_domain_slice,
    add_template,
    consumer_pod,
    extended_resource_pod,
    make_dra,
    template_pod,
)
from ..hami import hami_pod, make_hami
from ..model import INF, Scenario, _uuid, align5

VARIANTS = {"mixed": (("v1",), True), "mixed-v1beta1": (("v1beta1",), True), "mixed-noattr": (("v1",), False)}
BALANCED = [["3g.40gb", 2], ["2g.20gb", 3], ["1g.10gb", 9], ["1g.10gb", 10]]
IMG_SERVE = "vllm/vllm-openai:v0.6.3"
IMG_TRAIN = "nvcr.io/nvidia/pytorch:24.05-py3"


def _h5(sc: Scenario, *parts) -> str:
    return _uuid(sc.name, sc.seed, *parts).replace("-", "")[:5]


def _rs(sc: Scenario, name: str) -> str:
    return f"{name}-" + _uuid(sc.name, sc.seed, "rs", name).replace("-", "")[:10]


def build(sc: Scenario, variant: str = "mixed") -> None:
    sc.dra_versions, sc.dra_attribution = VARIANTS[variant]
    T1 = sc.t1

    def ago(hours: float) -> float:
        return float(align5(T1 - hours * H))

    for ns, team in (("training", "research"), ("inference", "serving"), ("batch", "data"),
                     ("notebooks", "research"), ("platform", "platform")):
        sc.add_namespace(ns, {"team": team})
    sc.add_namespace("gpu-monitoring", {"resource.kubernetes.io/admin-access": "true"})
    sc.add_namespace("kube-system")
    _device_plugin_nodes(sc, ago)
    _dra_whole(sc, ago, with_extended="v1" in sc.dra_versions)
    _dra_mig(sc, ago)
    _hami(sc, ago)


def _device_plugin_nodes(sc: Scenario, ago) -> None:
    sc.add_node("dp-h100-0", "H100", 8, {"karpenter.sh/nodepool": "dp-h100"}, instance_type="p5.48xlarge")
    sc.add_node("dp-mig-0", "H100", 2, {"karpenter.sh/nodepool": "dp-mig"}, kind="mig",
                mig_layout=[BALANCED, [["4g.40gb", 1], ["3g.40gb", 2]]], instance_type="p5.48xlarge")
    sc.add_node("dp-ts-0", "L4", 2, {"cloud.google.com/gke-nodepool": "l4-ts"}, kind="timesliced", replicas=4,
                instance_type="g2-standard-24", cpu="24", memory="98304Mi", zone="us-central1-b")
    sc.add_pod("training", "pretrain-a-0", node="dp-h100-0", start=ago(72), gpus={"nvidia.com/gpu": 4},
               units=whole(sc, "dp-h100-0", range(4)), act="train", owner=("Job", "pretrain-a"),
               labels={"job-name": "pretrain-a"}, container="pytorch", image=IMG_TRAIN)
    rs = _rs(sc, "chat")
    for i, g in enumerate((4, 5)):
        sc.add_pod("inference", f"{rs}-{_h5(sc, 'chat', i)}", node="dp-h100-0", start=ago(40),
                   gpus={"nvidia.com/gpu": 1}, units=whole(sc, "dp-h100-0", [g]), act="infer",
                   owner=("ReplicaSet", rs), owner_parent=("Deployment", "chat"), labels={"app": "chat"},
                   container="vllm", image=IMG_SERVE)
    sc.add_pod("notebooks", "jupyter-ivy-0", node="dp-h100-0", start=ago(30), gpus={"nvidia.com/gpu": 1},
               units=whole(sc, "dp-h100-0", [6]), act="notebook_idle", active_until=ago(28),
               owner=("StatefulSet", "jupyter-ivy"), container="notebook")
    sc.add_pod("inference", "whisper-mig-0", node="dp-mig-0", start=ago(50), gpus={"nvidia.com/mig-3g.40gb": 1},
               units=mig(sc, "dp-mig-0", 0, [2]), act="infer", owner=("StatefulSet", "whisper-mig"))
    sc.add_pod("notebooks", "jupyter-jon-0", node="dp-mig-0", start=ago(20), gpus={"nvidia.com/mig-1g.10gb": 1},
               units=mig(sc, "dp-mig-0", 0, [9]), act="notebook", owner=("StatefulSet", "jupyter-jon"))
    sc.add_pod("training", f"ft-mig-{_h5(sc, 'ftmig')}", node="dp-mig-0", start=ago(26), finish=ago(6),
               end_phase="Succeeded", gpus={"nvidia.com/mig-4g.40gb": 1}, units=mig(sc, "dp-mig-0", 1, [1]),
               act="train", owner=("Job", "ft-mig"), labels={"job-name": "ft-mig"})
    rs = _rs(sc, "embed-small")
    for i, (g, r) in enumerate(((0, 0), (0, 1), (1, 0))):
        sc.add_pod("inference", f"{rs}-{_h5(sc, 'emb', i)}", node="dp-ts-0", start=ago(48),
                   gpus={"nvidia.com/gpu": 1}, units=ts_unit(sc, "dp-ts-0", g, r), act="infer",
                   owner=("ReplicaSet", rs), owner_parent=("Deployment", "embed-small"), cpu="4", memory="16Gi")


def _dra_whole(sc: Scenario, ago, with_extended: bool) -> None:
    for i in range(2):
        node = sc.add_node(f"dra-h100-{i}", "H100", 8, {"karpenter.sh/nodepool": "dra-h100"},
                           instance_type="p5.48xlarge")
        make_dra(sc, node)
    add_compute_domain_slice(sc, "dra-h100-1")
    four = add_template(sc, "training", "four-gpus", [Request("gpus", GPU_CLASS, count=4)])
    single = add_template(sc, "inference", "single-gpu", [Request("gpu", GPU_CLASS)])
    batch_single = add_template(sc, "batch", "single-gpu", [Request("gpu", GPU_CLASS)])
    admin = add_template(sc, "gpu-monitoring", "all-gpus-admin",
                         [Request("gpus", GPU_CLASS, admin_access=True)])
    gpus = [f"gpu-{g}" for g in range(8)]
    # dra-h100-0
    template_pod(sc, "training", f"ddp-dra-{_h5(sc, 'ddp')}", four, gpus[:4], node="dra-h100-0", start=ago(50),
                 act="train", owner=("Job", "ddp-dra"), labels={"job-name": "ddp-dra"}, container="pytorch",
                 image=IMG_TRAIN)
    rs = _rs(sc, "vllm-dra")
    for i, g in enumerate((4, 5)):
        template_pod(sc, "inference", f"{rs}-{_h5(sc, 'vllm', i)}", single, [gpus[g]], node="dra-h100-0",
                     start=ago(36), act="infer", owner=("ReplicaSet", rs), owner_parent=("Deployment", "vllm-dra"),
                     labels={"app": "vllm-dra"}, container="vllm", image=IMG_SERVE)
    shared = add_claim(sc, "inference", "shared-h100", "dra-h100-0", [Request("gpu", GPU_CLASS)], [gpus[6]],
                       created=ago(21), allocated=ago(20), released=INF)
    rs = _rs(sc, "rag-api")
    consumer_pod(sc, "inference", f"{rs}-{_h5(sc, 'rag')}", shared, start=ago(20), act="infer",
                 owner=("ReplicaSet", rs), owner_parent=("Deployment", "rag-api"), labels={"app": "rag-api"})
    consumer_pod(sc, "inference", "eval-harness-0", shared, start=ago(13.5), finish=ago(8), end_phase="Succeeded",
                 act="eval", owner=("Job", "eval-harness"), labels={"job-name": "eval-harness", "team": "research"})
    template_pod(sc, "gpu-monitoring", "dcgm-probe-dra-h100-0", admin, [], node="dra-h100-0", start=ago(24 * 9),
                 act="ghost", owner=("DaemonSet", "dcgm-probe"), pod_claim="gpus", cpu="1", memory="1Gi")
    if with_extended:
        extended_resource_pod(sc, "batch", f"legacy-cuda-{_h5(sc, 'legacy')}", [gpus[7]], node="dra-h100-0",
                              start=ago(10), finish=ago(4), end_phase="Succeeded", act="batch",
                              owner=("Job", "legacy-cuda"), labels={"job-name": "legacy-cuda"})
    # dra-h100-1
    reserved = add_claim(sc, "platform", "reserved-h100-pair", "dra-h100-1", [Request("gpus", GPU_CLASS, count=2)],
                         gpus[:2], created=ago(27), allocated=ago(26), released=ago(5))
    consumer_pod(sc, "platform", "capacity-test-0", reserved, start=ago(26), finish=ago(12), end_phase="Succeeded",
                 act="eval", owner=("Job", "capacity-test"), labels={"job-name": "capacity-test"},
                 pod_claim="pair")
    start, n = ago(30), 0
    while start < ago(2):
        template_pod(sc, "batch", f"embed-{n:03d}-{_h5(sc, 'embed', n)}", batch_single, [gpus[2]], node="dra-h100-1",
                     start=start, finish=start + 2 * H, end_phase="Succeeded", act="batch",
                     owner=("Job", f"embed-{n:03d}"), labels={"job-name": f"embed-{n:03d}"})
        start, n = start + 3 * H, n + 1
    template_pod(sc, "training", f"sft-dra-{_h5(sc, 'sft')}", four, gpus[4:], node="dra-h100-1", start=ago(20),
                 finish=ago(2.5), end_phase="Failed", xid=31, act="train", owner=("Job", "sft-dra"),
                 labels={"job-name": "sft-dra"}, container="pytorch", image=IMG_TRAIN)


def _dra_mig(sc: Scenario, ago) -> None:
    layout = [[["3g.40gb", 2], ["2g.20gb", 3], ["1g.10gb", 9], ["1g.10gb", 10]],
              [["3g.40gb", 1], ["2g.20gb", 5], ["1g.10gb", 13]], None, None]
    node = sc.add_node("dra-mig-0", "A100", 4, {"kubernetes.azure.com/agentpool": "migpool"}, kind="mig",
                       mig_layout=layout, instance_type="Standard_ND96amsr_A100_v4", zone="eastus-1")
    make_dra(sc, node, gfd=False, whole_too=(0,))
    names = {(d.minor, d.profile): d.name for d in sc.dra_devices["dra-mig-0"] if d.type == "mig"}
    ones = sorted(d.name for d in sc.dra_devices["dra-mig-0"] if d.minor == 0 and d.profile == "1g.10gb")
    mig3 = add_template(sc, "inference", "mig-3g", [Request("mig", MIG_CLASS, profile="3g.40gb")])
    mig1 = add_template(sc, "notebooks", "mig-1g", [Request("mig", MIG_CLASS, profile="1g.10gb")])
    pair = add_template(sc, "inference", "mig-pair", [Request("mig-2g", MIG_CLASS, profile="2g.20gb"),
                                                      Request("mig-1g", MIG_CLASS, profile="1g.10gb")])
    whole_gpu = add_template(sc, "training", "one-gpu", [Request("gpu", GPU_CLASS)])
    template_pod(sc, "inference", f"{_rs(sc, 'tts-mig')}-{_h5(sc, 'tts')}", mig3, [names[(0, "3g.40gb")]],
                 node="dra-mig-0", start=ago(60), act="infer", owner=("ReplicaSet", _rs(sc, "tts-mig")),
                 owner_parent=("Deployment", "tts-mig"), pod_claim="mig")
    template_pod(sc, "notebooks", "jupyter-kim-0", mig1, [ones[0]], node="dra-mig-0", start=ago(22),
                 act="notebook_idle", active_until=ago(21), owner=("StatefulSet", "jupyter-kim"), pod_claim="mig",
                 container="notebook")
    rs = _rs(sc, "pipeline")
    template_pod(sc, "inference", f"{rs}-{_h5(sc, 'pipe')}", pair, [names[(1, "2g.20gb")], names[(1, "1g.10gb")]],
                 node="dra-mig-0", start=ago(28), act="infer", owner=("ReplicaSet", rs),
                 owner_parent=("Deployment", "pipeline"), pod_claim="mig-devices", container="ctr0",
                 container_requests={"ctr0": ["mig-2g"], "ctr1": ["mig-1g"]})
    template_pod(sc, "training", f"resnet-aks-{_h5(sc, 'aks')}", whole_gpu, ["gpu-2"], node="dra-mig-0",
                 start=ago(16), finish=ago(3), end_phase="Succeeded", act="batch", owner=("Job", "resnet-aks"),
                 labels={"job-name": "resnet-aks"})


def _hami(sc: Scenario, ago) -> None:
    l4 = sc.add_node("hami-l4-0", "L4", 2, {"karpenter.sh/nodepool": "hami-l4"}, instance_type="g2-standard-24",
                     cpu="24", memory="98304Mi", zone="us-central1-b")
    make_hami(sc, l4, encoding="comma")
    a100 = sc.add_node("hami-a100-0", "A100", 2, {}, instance_type="a2-highgpu-2g", cpu="24", memory="174080Mi",
                       zone="us-central1-a")
    make_hami(sc, a100, encoding="json", devcore=200, gfd=False)
    rs = _rs(sc, "asr-hami")
    hami_pod(sc, "inference", f"{rs}-{_h5(sc, 'asr')}", [0], node="hami-l4-0", start=ago(40), act="infer",
             resources={"nvidia.com/gpu": 1, "nvidia.com/gpucores": 30, "nvidia.com/gpumem": 8000},
             owner=("ReplicaSet", rs), owner_parent=("Deployment", "asr-hami"))
    hami_pod(sc, "batch", f"feature-cache-{_h5(sc, 'fc')}", [0], node="hami-l4-0", start=ago(29), act="batch",
             resources={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 6000}, sidecar=True,
             owner=("StatefulSet", "feature-cache"))
    hami_pod(sc, "notebooks", "jupyter-lee-0", [1], node="hami-l4-0", start=ago(18), act="notebook",
             resources={"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 50, "nvidia.com/gpucores": 40},
             owner=("StatefulSet", "jupyter-lee"), container="notebook")
    hami_pod(sc, "batch", f"transcode-{_h5(sc, 'tc')}", [0, 1], node="hami-l4-0", start=ago(6), finish=ago(2),
             end_phase="Succeeded", act="batch", resources={"nvidia.com/gpu": 2, "nvidia.com/gpucores": 20},
             owner=("Job", "transcode"), labels={"job-name": "transcode"})
    fifty = {"nvidia.com/gpu": 1, "nvidia.com/gpucores": 50, "nvidia.com/gpumem": 20000}
    hami_pod(sc, "inference", "tenant-a-0", [0], node="hami-a100-0", start=ago(30), act="infer", resources=fifty,
             owner=("StatefulSet", "tenant-a"))
    hami_pod(sc, "training", "tenant-b-0", [0], node="hami-a100-0", start=ago(20), finish=ago(5.5),
             end_phase="Succeeded", act="train", resources=fifty, owner=("Job", "tenant-b"),
             labels={"job-name": "tenant-b"})
    hami_pod(sc, "batch", "tenant-c-0", [0], node="hami-a100-0", start=ago(16.5), finish=ago(3),
             end_phase="Succeeded", act="batch", resources=fifty, owner=("Job", "tenant-c"),
             labels={"job-name": "tenant-c"})
    hami_pod(sc, "training", "exclusive-0", [1], node="hami-a100-0", start=ago(12), act="train",
             resources={"nvidia.com/gpu": 1, "nvidia.com/gpucores": 100}, owner=("StatefulSet", "exclusive"))


# ------------------------------------------------------------------------------ the demo's switch
WEEK_HOURS = 7 * 24


def add_to_demo(sc: Scenario) -> None:
    """What ``build_scenario("demo", with_dra=True)`` appends to the demo (after everything else, so the demo's
    own pods keep their positions and so their activity): the node group `h100-dra` (2 nodes x 4 H100 through
    NVIDIA's DRA driver, served as `resource.k8s.io/v1` with DRA attribution) and the HAMi node `l4-hami-0`
    (2 L4, no GFD labels, so no device-plugin L4 selector matches it), with a template-claim training run, a
    one-GPU Deployment, a claim shared by `serving` and `research`, an idle claim and three HAMi tenants.

    It runs like the demo's own work through the whole scenario, so a longer demo has no step in its last days (the
    forecast's backtest, bench/forecast.py): the services, the shared claim's serving consumer and the HAMi tenants
    run from before the scenario's start; the jobs keep a weekly rhythm counted back from the end. Each week: the
    template-claim training run `pretrain-dra-0` (14 h), then `pretrain-dra-1` until 4 h before the next week's
    first run, `research`'s 6.5 h on the shared claim and the idle claim `warm-spare` (its 7 h job, then 9 h held
    with no consumer). The last week's are the ones the short demos show (their last two days); earlier weeks' copies
    carry a `-w<k>` suffix (k weeks earlier) and are appended after everything else."""
    T0, T1 = sc.t0, sc.t1

    def at(base: float, hours: float) -> float:
        return float(align5(base + hours * H))

    sc.dra_versions, sc.dra_attribution = ("v1",), True
    for i in range(2):
        make_dra(sc, sc.add_node(f"h100-dra-{i}", "H100", 4, {"karpenter.sh/nodepool": "h100-dra"},
                                 instance_type="p5.48xlarge"))
    x4 = add_template(sc, "ml-training", "h100-x4", [Request("gpus", GPU_CLASS, count=4)])
    x1 = add_template(sc, "llm-serving", "h100-x1", [Request("gpu", GPU_CLASS)])
    gpus = [f"gpu-{g}" for g in range(4)]

    def pretrain(k: int, i: int, start: float, finish: float | None) -> None:
        job = f"pretrain-dra-{i}" + (f"-w{k}" if k else "")
        ends = {} if finish is None else {"finish": finish, "end_phase": "Succeeded"}
        template_pod(sc, "ml-training", f"pretrain-dra-{_h5(sc, 'pre', i, *([k] if k else []))}", x4, gpus,
                     node="h100-dra-0", start=start, act="train", owner=("Job", job), labels={"job-name": job},
                     container="pytorch", **ends)

    def evaluation(k: int, shared: int) -> None:
        job = "eval-dra" + (f"-w{k}" if k else "")
        consumer_pod(sc, "llm-serving", f"{job}-0", shared, start=at(T1, -17.5 - WEEK_HOURS * k),
                     finish=at(T1, -11 - WEEK_HOURS * k), end_phase="Succeeded", act="eval",
                     owner=("Job", job), labels={"job-name": job, "team": "research"})

    def warm_spare(k: int) -> None:
        week = f"-w{k}" if k else ""
        back = -WEEK_HOURS * k
        spare = add_claim(sc, "ml-training", f"warm-spare{week}", "h100-dra-1", [Request("gpu", GPU_CLASS)],
                          [gpus[3]], created=at(T1, -23 + back), allocated=at(T1, -22 + back),
                          released=at(T1, -6 + back))
        consumer_pod(sc, "ml-training", f"warmup{week}-0", spare, start=at(T1, -22 + back),
                     finish=at(T1, -15 + back), end_phase="Succeeded", act="batch", owner=("Job", f"warmup{week}"),
                     labels={"job-name": f"warmup{week}"}, pod_claim="spare")

    pretrain(0, 0, at(T1, -44), at(T1, -30))
    pretrain(0, 1, at(T1, -28), None)
    rs = _rs(sc, "reranker-dra")
    for i in range(2):
        template_pod(sc, "llm-serving", f"{rs}-{_h5(sc, 'rrd', i)}", x1, [gpus[i]], node="h100-dra-1",
                     start=at(T0, -24), act="infer", owner=("ReplicaSet", rs),
                     owner_parent=("Deployment", "reranker-dra"), labels={"app": "reranker-dra"})
    shared = add_claim(sc, "llm-serving", "shared-eval-gpu", "h100-dra-1", [Request("gpu", GPU_CLASS)], [gpus[2]],
                       created=at(T0, -25), allocated=at(T0, -24), released=INF)
    consumer_pod(sc, "llm-serving", "rag-dra-0", shared, start=at(T0, -24), act="infer",
                 owner=("StatefulSet", "rag-dra"))
    evaluation(0, shared)
    warm_spare(0)
    make_hami(sc, sc.add_node("l4-hami-0", "L4", 2, {}, instance_type="g2-standard-24", cpu="24",
                              memory="98304Mi", zone="us-central1-b"), gfd=False)
    hami_pod(sc, "llm-serving", "tts-hami-0", [0], node="l4-hami-0", start=at(T0, -12), act="infer",
             resources={"nvidia.com/gpu": 1, "nvidia.com/gpucores": 30, "nvidia.com/gpumem": 6000},
             owner=("StatefulSet", "tts-hami"))
    hami_pod(sc, "batch", "embed-cache-0", [0], node="l4-hami-0", start=at(T0, -12), act="batch",
             resources={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4096}, owner=("StatefulSet", "embed-cache"))
    hami_pod(sc, "notebooks", "jupyter-mia-0", [1], node="l4-hami-0", start=at(T0, -12), act="notebook",
             resources={"nvidia.com/gpu": 1, "nvidia.com/gpucores": 50}, owner=("StatefulSet", "jupyter-mia"),
             container="notebook")
    # Earlier weeks, newest first, while any of a week's runs ends after the scenario's start.
    k = 1
    while at(T1, -WEEK_HOURS * (k - 1) - 48) > T0:
        back = -WEEK_HOURS * k
        pretrain(k, 1, at(T1, -28 + back), at(T1, -48 + back + WEEK_HOURS))
        if at(T1, -30 + back) > T0:
            pretrain(k, 0, at(T1, -44 + back), at(T1, -30 + back))
        if at(T1, -11 + back) > T0:
            evaluation(k, shared)
        if at(T1, -6 + back) > T0:
            warm_spare(k)
        k += 1
