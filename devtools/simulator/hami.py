"""GPUs handed out by HAMi fractions: the model and its builders (DRA claims: ``dra``).

Imports only the model. The oracle (``tests/oracle/accelerators.py``) computes the truth from exactly what is
described here.

HAMi (``Node.kind == "hami"``):

* Node label ``gpu=on``; capacity and allocatable ``nvidia.com/gpu`` = GPUs x ``deviceSplitCount`` (10); the
  annotation ``hami.io/node-nvidia-register`` lists every GPU (``HamiDevice``): ``devmem`` = the model's
  memory (MiB), ``devcore`` (100, or 200 where the node scales cores to let tenants oversubscribe), ``type`` =
  ``NVIDIA-`` + the NVML name, in the comma form (``UUID,count,devmem,devcore,type,numa,health,index,mode:``) or
  the JSON form (zero values omitted). GFD labels may be there or not.
* A tenant (``HamiAlloc``) got ``mem`` MiB and ``cores`` percent of one GPU, as HAMi's scheduler gives them:
  ``gpumem`` as asked, else ``devmem x gpumem-percentage / 100`` (integer), else all of ``devmem``; ``cores``
  = ``gpucores`` (at most 100), else 0. The pod's ``hami.io/vgpu-devices-allocated`` says so per container.
  Its unit sits on the GPU's entity (``Unit.share`` = cores / 100 if cores > 0 else mem / devmem, before any
  oversubscription scaling, which is the oracle's business), so the GPU's activity is the sum of its tenants'
  demands (capped at 1, as time-sliced tenants); dcgm-exporter never attributes HAMi tenants: the GPU's series
  carry no pod.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .model import MODELS, Container, Node, Pod, Scenario, Unit, iso

SCHEDULER = "hami-scheduler"  # the scheduler name HAMi's webhook gives its pods
HAMI_SPLIT = 10  # deviceSplitCount: vGPUs per GPU
HAMI_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpucores", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage")


@dataclass
class HamiDevice:
    uuid: str
    index: int
    entity: int
    devmem: int
    devcore: int
    type: str


@dataclass
class HamiNode:
    node: str
    encoding: str  # comma | json
    devices: list  # [HamiDevice]


@dataclass
class HamiAlloc:
    container: str
    entity: int
    uuid: str
    mem: int  # MiB
    cores: int  # percent


def _register_comma(devices: list) -> str:
    return "".join(f"{d.uuid},{HAMI_SPLIT},{d.devmem},{d.devcore},{d.type},0,true,{d.index},hami-core:"
                   for d in devices)


def _register_json(devices: list) -> str:
    out = []
    for d in devices:
        item = {"id": d.uuid, "index": d.index, "count": HAMI_SPLIT, "devmem": d.devmem, "devcore": d.devcore,
                "type": d.type, "mode": "hami-core", "health": True}
        out.append({k: v for k, v in item.items() if v != 0})  # HAMi >= 2.8 omits zero values
    return json.dumps(out, separators=(",", ":"))


def make_hami(sc: Scenario, node: Node, *, encoding: str = "comma", devcore: int = 100, gfd: bool = True) -> Node:
    """Turn a whole-GPU node built by ``Scenario.add_node`` into a HAMi node (see the module docstring)."""
    if encoding not in ("comma", "json"):
        raise ValueError(encoding)
    if not gfd:
        for k in [k for k in node.labels if k.startswith("nvidia.com/")]:
            del node.labels[k]
    node.labels["gpu"] = "on"
    node.kind = "hami"
    for res in (node.capacity, node.allocatable):
        res["nvidia.com/gpu"] = str(node.gpus * HAMI_SPLIT)
    m = MODELS[node.model]
    devices = [HamiDevice(e.uuid, e.gpu, e.idx, m["memory"], devcore, "NVIDIA-" + m["modelName"])
               for e in (sc.entities[i] for i in node.entities)]
    sc.hami[node.name] = HamiNode(node.name, encoding, devices)
    register = _register_comma(devices) if encoding == "comma" else _register_json(devices)
    sc.node_annotations[node.name] = {
        "hami.io/node-nvidia-register": register,
        "hami.io/node-handshake": "Reported " + _handshake(node.created),
    }
    return node


def _handshake(ts: float) -> str:
    return iso(ts).replace("T", " ").replace("Z", " +0000 UTC")


def hami_pod(sc: Scenario, namespace: str, name: str, gpus: list[int], *, node: str, start: float,
             resources: dict, sidecar: bool = False, **pod) -> Pod:
    """A HAMi tenant on ``gpus`` of ``node`` (indexes), asking ``resources`` (``nvidia.com/gpu`` = len(gpus)
    plus ``nvidia.com/gpucores`` / ``gpumem`` / ``gpumem-percentage``); ``sidecar``: a second container without
    GPU (an empty entry in the annotation)."""
    hn = sc.hami[node]
    if resources.get("nvidia.com/gpu") != len(gpus) or set(resources) - set(HAMI_RESOURCES):
        raise ValueError(f"bad HAMi request {resources}")
    p = sc.add_pod(namespace, name, node=node, start=start, gpus=dict(resources), **pod)
    if sidecar:
        p.containers.append(Container("log-shipper", "fluent/fluent-bit:3.1", {}, cpu="500m", memory="256Mi"))
    allocs = []
    for g in gpus:
        d = hn.devices[g]
        if "nvidia.com/gpumem" in resources:
            mem = int(resources["nvidia.com/gpumem"])
        elif "nvidia.com/gpumem-percentage" in resources:
            mem = d.devmem * int(resources["nvidia.com/gpumem-percentage"]) // 100
        else:
            mem = d.devmem
        cores = min(100, int(resources.get("nvidia.com/gpucores", 0)))
        a = HamiAlloc(p.containers[0].name, d.entity, d.uuid, mem, cores)
        allocs.append(a)
        share = cores / 100.0 if cores > 0 else mem / d.devmem
        p.units.append(Unit(entity=d.entity, resource="hami", share=share))
        sc.entities[d.entity].intervals.append((p.start, p.hold_end, p.idx, a.container, None, False))
    sc.hami_allocs[p.idx] = allocs
    entries = []
    for c in p.containers:
        entries.append("".join(f"{a.uuid},NVIDIA,{a.mem},{a.cores}:" for a in allocs if a.container == c.name))
    p.annotations.update({
        "hami.io/vgpu-devices-allocated": "".join(e + ";" for e in entries),
        "hami.io/vgpu-devices-to-allocate": ";" * len(entries),
        "hami.io/vgpu-node": node,
        "hami.io/vgpu-time": str(int(p.start)),
        "hami.io/bind-phase": "success",
        "hami.io/bind-time": str(int(p.start)),
    })
    return p
