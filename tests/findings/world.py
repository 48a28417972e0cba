"""A hand-made cluster with one case of each bucket kind, its DCGM history as OpenMetrics for a real Prometheus,
and the findings it must give (`EXPECTED`), worked out by hand.

Three H100 nodes ($2.00 per GPU-hour), four collected hours H0..H3 (10:00-14:00 UTC), samples every minute:

* h100-a, GPUs a0-a7: PyTorchJob `llm` (ml), pods train-0 (a0-a3) and train-1 (a4-a7), SM 0.9 except a7 at 0.3
  -> straggler, every hour: waste = (1 - 0.3/0.9) x 7 GPU-hours = 4.667 GPU-h per hour.
* h100-b: nb-0 (notebooks, b0) SM 0.001 with 12,000 MiB of framebuffer -> idle_held (its 1 GPU-h per hour);
  idle-0 (serving, b1) SM 0, 100 MiB -> idle_allocation (1 GPU-h per hour); busy-0 (vision, b2) SM 0.8 with
  XID 79 from H1+10m -> unhealthy_gpu/xid H1..H3; hot-0 (vision, b3) SM 0.8, clock events 0x28 (sw_thermal |
  hw_slowdown) -> unhealthy_gpu/throttle H0..H3; steady-0 (vision, b4+b5) SM 0.8 with 0x4 (power cap: healthy)
  -> nothing; van-0 (infra, b7) SM 0.7 whose GPU stops reporting at H1+30m -> unhealthy_gpu/vanished H2..H3 (the
  first hour without any sample). Unhealthy GPUs count the GPU's hours; what van-0 etc. were charged for them
  is the infra loss.
* h100-c: c0 nobody holds at SM 0.5 -> unattributed_activity H0..H3 (1 GPU-h per hour); c1-c3 unheld, SM 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from apps.inventory.observations import ClusterSnapshot, ContainerRequest, NamespaceInfo, NodeInfo, PodInfo

H0 = datetime(2026, 11, 23, 10, tzinfo=UTC)
HOURS = [H0 + timedelta(hours=i) for i in range(4)]
NOW = H0 + timedelta(hours=4, minutes=5)
PRICE = Decimal("2.00")
PRODUCT = "NVIDIA-H100-80GB-HBM3"
NODES = {"h100-a": "a", "h100-b": "b", "h100-c": "c"}


def node_info(name: str) -> NodeInfo:
    return NodeInfo(name, {"nvidia.com/gpu.product": PRODUCT, "nvidia.com/gpu.count": "8" if name != "h100-c" else "4",
                           "karpenter.sh/nodepool": "h100"},
                    {"nvidia.com/gpu": "8" if name != "h100-c" else "4"},
                    {"nvidia.com/gpu": "8" if name != "h100-c" else "4"}, True, False, H0 - timedelta(days=3))


@dataclass
class Pod:
    name: str
    namespace: str
    node: str
    gpus: list[str]  # device UUIDs
    team: str
    labels: dict[str, str] = field(default_factory=dict)
    owner: tuple[str, str] | None = None

    @property
    def uid(self) -> str:
        return f"uid-{self.name}"

    def info(self) -> PodInfo:
        return PodInfo(
            uid=self.uid, namespace=self.namespace, name=self.name, node=self.node, phase="Running",
            labels={"team": self.team, **self.labels}, annotations={},
            containers=(ContainerRequest("main", "app", {"nvidia.com/gpu": float(len(self.gpus))}),),
            created=H0 - timedelta(hours=2), started=H0 - timedelta(hours=2), finished=None, deletion=None,
            owner=self.owner,
        )


KUBEFLOW = {"training.kubeflow.org/job-name": "llm", "training.kubeflow.org/operator-name": "pytorchjob-controller"}
PODS = [
    Pod("train-0", "ml", "h100-a", ["a0", "a1", "a2", "a3"], "research", KUBEFLOW),
    Pod("train-1", "ml", "h100-a", ["a4", "a5", "a6", "a7"], "research", KUBEFLOW),
    Pod("nb-0", "notebooks", "h100-b", ["b0"], "research", owner=("StatefulSet", "nb")),
    Pod("idle-0", "serving", "h100-b", ["b1"], "serving", owner=("Deployment", "idle")),
    Pod("busy-0", "vision", "h100-b", ["b2"], "vision"),
    Pod("hot-0", "vision", "h100-b", ["b3"], "vision"),
    Pod("steady-0", "vision", "h100-b", ["b4", "b5"], "vision", owner=("Deployment", "steady")),
    Pod("van-0", "infra", "h100-b", ["b7"], "infra"),
]
HOLDER = {gpu: pod for pod in PODS for gpu in pod.gpus}
XID_AT = H0 + timedelta(hours=1, minutes=10)
VANISH_AT = H0 + timedelta(hours=1, minutes=30)


def uuid(gpu: str) -> str:
    return f"GPU-{gpu}"


def values(gpu: str, t: datetime) -> dict[str, float] | None:
    """The DCGM values of one GPU at t; None once it stopped reporting."""
    if gpu == "b7" and t >= VANISH_AT:
        return None
    pod = HOLDER.get(gpu)
    sm = {"a7": 0.3, "b0": 0.001, "b1": 0.0, "b2": 0.8, "b3": 0.8, "b4": 0.8, "b5": 0.8, "b7": 0.7,
          "c0": 0.5}.get(gpu, 0.9 if gpu.startswith("a") else 0.0)
    fb = {"b0": 12000.0, "b1": 100.0}.get(gpu, 30000.0 if pod else 0.0)
    clock = 0x28 if gpu == "b3" else 0x4 if sm > 0.78 else 0x1 if sm < 0.01 else 0
    xid = 79 if gpu == "b2" and t >= XID_AT else 0
    return {"DCGM_FI_PROF_SM_ACTIVE": sm, "DCGM_FI_PROF_GR_ENGINE_ACTIVE": min(1.0, sm + 0.05),
            "DCGM_FI_DEV_FB_USED": fb, "DCGM_FI_DEV_XID_ERRORS": xid, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": clock}


def gpus() -> list[tuple[str, str, int]]:
    out = []
    for node, prefix in NODES.items():
        for i in range(8 if node != "h100-c" else 4):
            out.append((node, f"{prefix}{i}", i))
    return out


def write_openmetrics(path: Path, *, exported: bool = False, start: datetime = H0 - timedelta(minutes=10),
                      end: datetime = H0 + timedelta(hours=4, minutes=5),
                      values_of: Callable[[str, datetime], dict[str, float] | None] = values) -> Path:
    """Every GPU's series every minute over [start, end): with the holder's pod labels (as dcgm-exporter with
    --kubernetes), renamed exported_* and with the exporter's own pod label when `exported`."""
    metrics = ["DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_FB_USED",
               "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"]
    lines: dict[str, list[str]] = {m: [f"# TYPE {m} gauge"] for m in metrics}
    minutes = int((end - start).total_seconds() // 60)
    for node, gpu, index in gpus():
        labels = {"UUID": uuid(gpu), "gpu": str(index), "Hostname": node, "DCGM_FI_DRIVER_VERSION": "550.54.15"}
        pod = HOLDER.get(gpu)
        if exported:
            labels.update(namespace="gpu-operator", pod=f"nvidia-dcgm-exporter-{node}", container="exporter")
            if pod:
                labels.update(exported_namespace=pod.namespace, exported_pod=pod.name, exported_container="main")
        elif pod:
            labels.update(namespace=pod.namespace, pod=pod.name, container="main")
        text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        for i in range(minutes):
            t = start + timedelta(minutes=i)
            v = values_of(gpu, t)
            if v is None:
                continue
            for m in metrics:
                lines[m].append(f"{m}{{{text}}} {v[m]:g} {int(t.timestamp())}")
    path.write_text("\n".join([line for m in metrics for line in lines[m]] + ["# EOF", ""]))
    return path


def snapshot(taken_at: datetime = NOW) -> ClusterSnapshot:
    namespaces = tuple(NamespaceInfo(ns, {}) for ns in sorted({p.namespace for p in PODS}))
    return ClusterSnapshot(taken_at, tuple(node_info(n) for n in NODES), tuple(p.info() for p in PODS), namespaces)


# (kind, subject) -> (start, end, hours, GPU-hours, cost, team, infra loss GPU-hours); end None: ongoing (H3 is
# the latest collected hour).
WASTE = (1 - 0.3 / 0.9) * 7
EXPECTED = {
    ("straggler", "ml/PyTorchJob/llm"): (HOURS[0], None, 4, 4 * WASTE, 4 * WASTE * 2, "research", 32.0),
    ("idle_held", "uid-nb-0"): (HOURS[0], None, 4, 4.0, 8.0, "research", 4.0),
    ("idle_allocation", "uid-idle-0"): (HOURS[0], None, 4, 4.0, 8.0, "serving", 4.0),
    ("unhealthy_gpu", "h100-b/GPU-b2/xid"): (HOURS[1], None, 3, 3.0, 6.0, "vision", 3.0),
    ("unhealthy_gpu", "h100-b/GPU-b3/throttle"): (HOURS[0], None, 4, 4.0, 8.0, "vision", 4.0),
    ("unhealthy_gpu", "h100-b/GPU-b7/vanished"): (HOURS[2], None, 2, 2.0, 4.0, "infra", 2.0),
    ("unattributed_activity", "h100-c/GPU-c0"): (HOURS[0], None, 4, 4.0, 8.0, "", 0.0),
}
