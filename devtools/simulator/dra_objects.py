"""``resource.k8s.io`` objects of a scenario at an instant: ResourceSlices, ResourceClaims, ResourceClaimTemplates
and DeviceClasses, in the shape of the version asked (``v1`` and ``v1beta2``: device fields on the device and a
request's class under ``exactly``; ``v1beta1``: device fields under ``basic``, the class on the request).

Objects carry ``kind``/``apiVersion`` (what a GET of one object answers); the API server's LIST strips them from
the items, as a real one does.
"""

from __future__ import annotations

from . import dra
from .model import DRIVER as NVIDIA_DRIVER
from .model import MIG_PROFILES, MODELS, Scenario, _uuid, to_ts
from .objects import _meta

KINDS = ("resourceslices", "resourceclaims", "resourceclaimtemplates", "deviceclasses")
VERSIONS = ("v1", "v1beta2", "v1beta1")
KIND_OF = {"resourceslices": "ResourceSlice", "resourceclaims": "ResourceClaim",
           "resourceclaimtemplates": "ResourceClaimTemplate", "deviceclasses": "DeviceClass"}
NAMESPACED = {"resourceclaims", "resourceclaimtemplates"}
ARCHITECTURE = {"hopper": "Hopper", "ampere": "Ampere", "ada-lovelace": "Ada Lovelace"}
SMS_PER_SLICE = {"H100": 16, "A100": 14}  # streaming multiprocessors of one compute slice
CUDA_DRIVER = "12.4.0"
# The chart's DeviceClasses (templates/deviceclass-*.yaml): (name, driver, device type); only GPUs and MIG devices are
# GPUs a pod holds, the others are there to be ignored.
DEVICE_CLASSES = (
    (dra.GPU_CLASS, "gpu.nvidia.com", "gpu"),
    (dra.MIG_CLASS, "gpu.nvidia.com", "mig"),
    ("vfio.gpu.nvidia.com", "gpu.nvidia.com", "vfio"),
    ("compute-domain-default-channel.nvidia.com", "compute-domain.nvidia.com", "channel"),
    ("compute-domain-daemon.nvidia.com", "compute-domain.nvidia.com", "daemon"),
)


def _wrap(version: str, fields: dict) -> dict:
    """A device's attributes and capacity where the version puts them."""
    return {"basic": fields} if version == "v1beta1" else fields


def _device(sc: Scenario, d: dra.Device, version: str) -> dict:
    e = sc.entities[d.entity]
    m = MODELS[e.model]
    attrs = {
        "architecture": {"string": ARCHITECTURE[m["family"]]},
        "brand": {"string": "Nvidia"},
        "cudaComputeCapability": {"version": f"{m['major']}.{m['minor']}.0"},
        "cudaDriverVersion": {"version": CUDA_DRIVER},
        "driverVersion": {"version": NVIDIA_DRIVER},
        "productName": {"string": m["modelName"]},
        "resource.kubernetes.io/pciBusID": {"string": e.pci[4:].lower()},
        "type": {"string": d.type},
        "uuid": {"string": d.uuid},
    }
    if d.type == "mig":
        attrs["parentUUID"] = {"string": d.parent_uuid}
        attrs["profile"] = {"string": d.profile}
        slices, mem = MIG_PROFILES[d.profile]
        capacity = {"memory": {"value": f"{mem}Mi"},
                    "multiprocessors": {"value": str(slices * SMS_PER_SLICE.get(e.model, 14))}}
    else:
        capacity = {"memory": {"value": f"{m['memory']}Mi"}}
    return {"name": d.name, **_wrap(version, {"attributes": attrs, "capacity": capacity})}


def _slice_meta(sc: Scenario, node, driver: str, part: int) -> dict:
    prefix = f"{node.name}-{driver}-"
    name = prefix + _uuid("slice", sc.name, sc.seed, node.name, driver, part).replace("-", "")[:5]
    return _meta(sc, name, node.created + 120, generateName=prefix, ownerReferences=[
        {"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": node.uid, "controller": True}])


def resourceslices(sc: Scenario, t: float, version: str) -> list[dict]:
    out = []
    for node_name, devices in sc.dra_devices.items():
        node = sc.node_by_name[node_name]
        if node.created > t:
            continue
        parts = sorted({d.slice for d in devices})
        for part in parts:
            out.append({
                "apiVersion": f"{dra.GROUP}/{version}", "kind": "ResourceSlice",
                "metadata": _slice_meta(sc, node, dra.DRIVER, part),
                "spec": {
                    "driver": dra.DRIVER, "nodeName": node.name,
                    "pool": {"name": node.name, "generation": 1, "resourceSliceCount": len(parts)},
                    "devices": [_device(sc, d, version) for d in devices if d.slice == part],
                },
            })
    for other in sc.dra_other_slices:
        node = sc.node_by_name[other.node]
        if node.created > t:
            continue
        devices = [{"name": name, **_wrap(version, {"attributes": {"type": {"string": kind}}})}
                   for name, kind in other.devices]
        out.append({
            "apiVersion": f"{dra.GROUP}/{version}", "kind": "ResourceSlice",
            "metadata": _slice_meta(sc, node, other.driver, 0),
            "spec": {"driver": other.driver, "nodeName": node.name,
                     "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1}, "devices": devices},
        })
    return out


def _request(r: dra.Request, version: str) -> dict:
    body: dict = {"deviceClassName": r.device_class}
    if r.admin_access:
        body.update({"allocationMode": "All", "adminAccess": True})
    else:
        body.update({"allocationMode": "ExactCount", "count": r.count})
    if r.profile:
        body["selectors"] = [{"cel": {"expression": f"device.attributes['gpu.nvidia.com'].profile == '{r.profile}'"}}]
    return {"name": r.name, **body} if version == "v1beta1" else {"name": r.name, "exactly": body}


def _claim(sc: Scenario, c: dra.Claim, t: float, version: str) -> dict:
    extra: dict = {}
    annotations = None
    if c.owner is not None:
        pod = sc.pods[c.owner]
        extra["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid,
                                     "controller": True, "blockOwnerDeletion": True}]
        if c.extended:
            extra["generateName"] = f"{pod.name}-extended-resources-"
            annotations = {"resource.kubernetes.io/extended-resource-claim": "true"}
        else:
            extra["generateName"] = f"{pod.name}-{c.pod_claim}-"
            annotations = {"resource.kubernetes.io/pod-claim-name": c.pod_claim}
    status: dict = {}
    if c.allocated_at(t):
        extra["finalizers"] = ["resource.kubernetes.io/delete-protection"]
        results = []
        for request, device, admin in c.results:
            r = {"request": request, "driver": dra.DRIVER, "pool": c.node, "device": device}
            if admin:
                r["adminAccess"] = True
            results.append(r)
        status["allocation"] = {
            "devices": {"results": results},
            "nodeSelector": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [c.node]}]}]},
        }
        reserved = [sc.pods[i] for i in c.consumers if sc.pods[i].held(t)]
        if reserved:
            status["reservedFor"] = [{"resource": "pods", "name": p.name, "uid": p.uid} for p in reserved]
    return {
        "apiVersion": f"{dra.GROUP}/{version}", "kind": "ResourceClaim",
        "metadata": _meta(sc, c.name, c.created, namespace=c.namespace, uid=c.uid, labels=c.labels or None,
                          annotations=annotations, **extra),
        "spec": {"devices": {"requests": [_request(r, version) for r in c.requests]}},
        "status": status,
    }


def resourceclaims(sc: Scenario, t: float, version: str) -> list[dict]:
    return [_claim(sc, c, t, version) for c in sc.claims if c.visible(t)]


def resourceclaimtemplates(sc: Scenario, t: float, version: str) -> list[dict]:
    return [{
        "apiVersion": f"{dra.GROUP}/{version}", "kind": "ResourceClaimTemplate",
        "metadata": _meta(sc, tp.name, sc.t0 - 30 * 86400, namespace=tp.namespace),
        "spec": {"spec": {"devices": {"requests": [_request(r, version) for r in tp.requests]}}},
    } for tp in sc.templates]


def deviceclasses(sc: Scenario, t: float, version: str) -> list[dict]:
    out = []
    for name, driver, kind in DEVICE_CLASSES:
        cel = f"device.driver == '{driver}' && device.attributes['{driver}'].type == '{kind}'"
        spec: dict = {"selectors": [{"cel": {"expression": cel}}]}
        if name == dra.GPU_CLASS and version == "v1":
            spec["extendedResourceName"] = dra.EXTENDED_RESOURCE
        out.append({"apiVersion": f"{dra.GROUP}/{version}", "kind": "DeviceClass",
                    "metadata": _meta(sc, name, sc.t0 - 30 * 86400), "spec": spec})
    return out


RENDER = {"resourceslices": resourceslices, "resourceclaims": resourceclaims,
          "resourceclaimtemplates": resourceclaimtemplates, "deviceclasses": deviceclasses}


def dra_objects(sc: Scenario, kind: str, at, version: str) -> list[dict]:
    """The ``resource.k8s.io`` objects of ``kind`` (one of ``KINDS``) at ``at`` in ``version``, as a GET of each
    would answer; ``[]`` for a scenario without DRA."""
    if kind not in RENDER or version not in VERSIONS:
        raise ValueError(f"unknown kind or version {kind!r} {version!r}")
    if not sc.dra_versions:
        return []
    return RENDER[kind](sc, to_ts(at), version)

