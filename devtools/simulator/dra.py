"""GPUs handed out by DRA claims (NVIDIA's DRA driver): the model and its builders (HAMi's fractions: ``hami``).

Imports only the model; scenarios build with these functions, ``dra_objects`` renders the objects, ``exposition``
the series. The oracle (``tests/oracle/accelerators.py``) computes the truth from exactly what is described here.

DRA (``Node.kind == "dra"``):

* ``Scenario.dra_versions`` are the ``resource.k8s.io`` versions the API server serves (none: the group answers
  404, as before DRA); ``/version`` and the kubelets follow (``kubernetes_minor``).
* A DRA node has no NVIDIA resource in its capacity or allocatable (no device plugin). Some DRA nodes keep GPU
  Feature Discovery's labels (with ``nvidia.com/gpu.deploy.device-plugin: "false"``), others have none.
* Its GPUs are published by driver ``gpu.nvidia.com`` in one pool named after the node (generation 1; a node
  with MIG devices lists them in a second slice of the pool). Attributes have bare names (``uuid``, ``type``,
  ``productName`` = the NVML name, ``parentUUID``, ``profile``; ``resource.kubernetes.io/pciBusID`` qualified),
  capacity ``memory`` in Mi. A GPU not in MIG mode is device ``gpu-<minor>`` (type ``gpu``, ``uuid`` its UUID).
  A GPU in MIG mode publishes its GPU instances as ``gpu-<minor>-mig-<profile without dots>-<profile id>-
  <placement>`` (type ``mig``, ``uuid`` ``MIG-...`` from ``mig_uuid``, ``parentUUID`` the GPU's UUID,
  ``profile``; the placement is the instance's first memory slot in a valid layout, ``placements``), and, where
  the scenario says so, its whole device too (as on AKS, dra-driver-nvidia-gpu#719). Devices of another driver
  (``compute-domain.nvidia.com`` channels, ``OtherSlice``) may sit beside them: not GPUs.
* A ResourceClaim (``Claim``) holds its devices (its ``results``) while allocated: ``[allocated, released)``.
  A claim generated from a ResourceClaimTemplate is named ``<pod>-<pod claim name>-<5 chars>``, owned by its
  pod, annotated ``resource.kubernetes.io/pod-claim-name``, exists ``[pod created, pod hold_end)`` and is
  allocated ``[pod start, pod hold_end)``: deleted with the pod (when it finishes or is deleted). A named claim
  exists from ``created`` (never deleted) and is allocated over the interval the scenario gives; it may be
  consumed by several pods (``consumers``) and stay allocated with none running. No device is held by two
  claims at once, nor a GPU's whole device while one of its MIG devices is (``check``).
* A consumer holds the claim's devices from its start to its ``hold_end`` (as any pod); ``status.reservedFor``
  lists the consumers holding at that instant. Pods name their claims in ``spec.resourceClaims`` and their
  containers' ``resources.claims``; ``status.resourceClaimStatuses`` (once started) names the generated claims
  only, as the API server fills it. A result with ``admin_access`` (a monitoring claim,
  ``allocationMode: All``) holds nothing: the pod gets no unit, no DCGM holder, and the exporter does not
  attribute it.
* A consumer's units (``Unit.resource == "dra"``) sit on the device's DCGM entity (the GPU, or the MIG
  instance) with ``Unit.share`` = the device's share of a GPU (1, or the MIG profile's compute slices / the
  model's); how a shared claim's share splits among consumers is the oracle's business, not the unit's.
* With ``Scenario.dra_attribution`` (dcgm-exporter's ``KUBERNETES_ENABLE_DRA``) a held device's series carry,
  per consuming pod, ``pod``, ``namespace``, ``container`` (the container that references the device's request)
  and ``dra_claim_name``, ``dra_claim_namespace``, ``dra_device_name``, ``dra_driver_name``, ``dra_pool_name``
  (MIG: ``dra_mig_profile``, ``dra_mig_device_uuid``), with ``UUID`` the physical GPU (MIG: with
  ``GPU_I_PROFILE``/``GPU_I_ID``) and no pod UID; without it, device series without pod labels.
* A pod asking ``nvidia.com/gpu`` on a DRA node of a cluster serving ``resource.k8s.io/v1`` (whose DeviceClass
  ``gpu.nvidia.com`` maps that extended resource) is served by a claim the scheduler generated:
  ``<pod>-extended-resources-<5 chars>``, request ``container-0-request-0``, named in the pod's
  ``status.extendedResourceClaimStatus``; the pod has no ``spec.resourceClaims``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .model import INF, MIG_PROFILES, MODELS, Container, Node, Pod, Scenario, Unit, _uuid

DRIVER = "gpu.nvidia.com"
GROUP = "resource.k8s.io"
GPU_CLASS, MIG_CLASS = "gpu.nvidia.com", "mig.nvidia.com"
CLASS_TYPE = {GPU_CLASS: "gpu", MIG_CLASS: "mig"}
EXTENDED_RESOURCE = "nvidia.com/gpu"  # DeviceClass gpu.nvidia.com's extendedResourceName (v1)
# NVML GPU instance profile ids of the 80 GB parts (nvidia-smi mig -lgip), named in MIG device names.
MIG_PROFILE_IDS = {"1g.10gb": 19, "2g.20gb": 14, "3g.40gb": 9, "4g.40gb": 5, "7g.80gb": 0}
# Memory slots (of 8) a GPU instance spans, and where it may start.
_SPAN = {1: 1, 2: 2, 3: 4, 4: 4, 7: 8}
_STARTS = {1: range(7), 2: (0, 2, 4), 3: (0, 4), 4: (0,), 7: (0,)}


@dataclass
class Device:
    """A device of a node's ``gpu.nvidia.com`` pool."""

    node: str
    name: str
    type: str  # gpu | mig
    entity: int  # its DCGM entity: the GPU, or the MIG instance
    uuid: str  # GPU-... or MIG-...
    minor: int
    parent_uuid: str | None = None
    profile: str | None = None
    slice: int = 0  # which of the pool's slices lists it


@dataclass
class OtherSlice:
    """A ResourceSlice of another driver on a node (ComputeDomain channels): devices that are not GPUs."""

    node: str
    driver: str
    devices: list  # [(name, type)]


@dataclass
class Request:
    """A device request of a claim or template: ``count`` devices of ``device_class`` (a MIG ``profile``), or
    with ``admin_access`` every device of the class (``allocationMode: All``)."""

    name: str
    device_class: str
    count: int = 1
    profile: str | None = None
    admin_access: bool = False


@dataclass
class Template:
    namespace: str
    name: str
    requests: list


@dataclass
class Claim:
    namespace: str
    name: str
    uid: str
    node: str
    requests: list  # [Request]
    results: list  # [(request name, device name, admin access)]
    created: float
    allocated: float
    released: float
    deleted: float = INF
    consumers: list = field(default_factory=list)  # pod idxs
    template: str | None = None  # generated from this ResourceClaimTemplate
    owner: int | None = None  # generated: the pod that owns it
    pod_claim: str | None = None  # generated: the pod's claim entry it was made for
    extended: bool = False  # made by the scheduler for an extended-resource request
    labels: dict = field(default_factory=dict)

    def visible(self, t: float) -> bool:
        return self.created <= t < self.deleted

    def allocated_at(self, t: float) -> bool:
        return self.allocated <= t < self.released


@dataclass
class PodClaim:
    """One ``spec.resourceClaims`` entry: a named claim, or a template's generated claim; ``containers``:
    container -> the requests it references (None: all of them). ``extended``: no such entry, the claim the
    scheduler made for an extended-resource request (``status.extendedResourceClaimStatus``)."""

    name: str
    claim: int  # index in Scenario.claims
    template: str | None
    containers: dict
    extended: bool = False


def kubernetes_minor(sc: Scenario) -> str:
    """The Kubernetes minor version the served ``resource.k8s.io`` versions imply, for the API server and the
    kubelets: 1.34 serves v1, a cluster serving only a beta is a 1.32; without DRA, 1.31."""
    return "34" if "v1" in sc.dra_versions else "32" if sc.dra_versions else "31"


# ------------------------------------------------------------------------------ naming
def mig_uuid(sc: Scenario, node: str, gpu: int, gi: str) -> str:
    return "MIG-" + _uuid("mig", sc.name, sc.seed, node, gpu, gi)


def generated_name(sc: Scenario, pod: str, claim: str) -> str:
    """``<pod>-<claim>-<5 chars>``, as the claim controller's generateName gives."""
    return f"{pod}-{claim}-" + _uuid("claim", sc.name, sc.seed, pod, claim).replace("-", "")[:5]


def placements(profiles: list[str]) -> list[int]:
    """A valid start slot for each GPU instance of a layout (in order), found by backtracking."""
    slices = [MIG_PROFILES[p][0] for p in profiles]
    order = sorted(range(len(profiles)), key=lambda i: -_SPAN[slices[i]])
    used = [False] * 8
    out = [0] * len(profiles)

    def place(k: int) -> bool:
        if k == len(order):
            return True
        i = order[k]
        span = _SPAN[slices[i]]
        for s in _STARTS[slices[i]]:
            if s + span <= 8 and not any(used[s : s + span]):
                used[s : s + span] = [True] * span
                out[i] = s
                if place(k + 1):
                    return True
                used[s : s + span] = [False] * span
        return False

    if not place(0):
        raise ValueError(f"MIG layout {profiles} does not fit one GPU")
    return out


def device_share(sc: Scenario, d: Device) -> float:
    """A device's share of its physical GPU: 1, or the MIG profile's compute slices / the model's."""
    if d.type == "gpu":
        return 1.0
    model = sc.entities[d.entity].model
    return MIG_PROFILES[d.profile][0] / MODELS[model]["slices"]


def device(sc: Scenario, node: str, name: str) -> Device:
    for d in sc.dra_devices[node]:
        if d.name == name:
            return d
    raise KeyError((node, name))


# ------------------------------------------------------------------------------ nodes
def _strip_device_plugin(node: Node, gfd: bool) -> None:
    for res in (node.capacity, node.allocatable):
        for r in [r for r in res if r.startswith("nvidia.com/")]:
            del res[r]
    if gfd:
        node.labels["nvidia.com/gpu.deploy.device-plugin"] = "false"
    else:
        for k in [k for k in node.labels if k.startswith("nvidia.com/")]:
            del node.labels[k]


def make_dra(sc: Scenario, node: Node, *, gfd: bool = True, whole_too: tuple = ()) -> Node:
    """Turn a node built by ``Scenario.add_node`` (whole GPUs, or MIG with ``mig_layout``) into a DRA node:
    no device-plugin resources, its GPUs published by ``gpu.nvidia.com`` (``whole_too``: GPUs in MIG mode whose
    whole device is published too)."""
    mig = any(sc.entities[i].mig_parent for i in node.entities)
    if mig and gfd:
        raise ValueError("a DRA node with MIG devices is modelled without GFD labels")
    _strip_device_plugin(node, gfd)
    node.kind = "dra"
    devices = []
    for gidx in node.entities:
        gpu = sc.entities[gidx]
        if not gpu.mig_parent or gpu.gpu in whole_too:
            devices.append(Device(node.name, f"gpu-{gpu.gpu}", "gpu", gidx, gpu.uuid, gpu.gpu))
        kids = [sc.entities[c] for c in gpu.children]
        for kid, start in zip(kids, placements([k.profile for k in kids]), strict=True):
            name = f"gpu-{gpu.gpu}-mig-{kid.profile.replace('.', '')}-{MIG_PROFILE_IDS[kid.profile]}-{start}"
            devices.append(Device(node.name, name, "mig", kid.idx, mig_uuid(sc, node.name, gpu.gpu, kid.gi_id),
                                  gpu.gpu, parent_uuid=gpu.uuid, profile=kid.profile, slice=1))
    sc.dra_devices[node.name] = devices
    return node


def add_compute_domain_slice(sc: Scenario, node: str, channels: int = 2) -> None:
    """ComputeDomain IMEX channels beside a node's GPUs (driver ``compute-domain.nvidia.com``): not GPUs."""
    sc.dra_other_slices.append(
        OtherSlice(node, "compute-domain.nvidia.com", [(f"channel-{i}", "channel") for i in range(channels)]))


# ------------------------------------------------------------------------------ claims and their pods
def add_template(sc: Scenario, namespace: str, name: str, requests: list) -> Template:
    t = Template(namespace, name, list(requests))
    sc.templates.append(t)
    return t


def _results(sc: Scenario, node: str, requests: list, devices: list[str]) -> list:
    """Each request's devices, in order (``devices``: the scenario's choice for the counted requests)."""
    out = []
    rest = list(devices)
    for r in requests:
        if r.admin_access:
            kind = CLASS_TYPE[r.device_class]
            out += [(r.name, d.name, True) for d in sc.dra_devices[node] if d.type == kind]
            continue
        for _ in range(r.count):
            d = device(sc, node, rest.pop(0))
            if d.type != CLASS_TYPE[r.device_class] or (r.profile and d.profile != r.profile):
                raise ValueError(f"{d.name} does not satisfy request {r.name}")
            out.append((r.name, d.name, False))
    if rest:
        raise ValueError(f"devices left over: {rest}")
    return out


def add_claim(sc: Scenario, namespace: str, name: str, node: str, requests: list, devices: list[str], *,
              created: float, allocated: float, released: float, labels: dict | None = None) -> int:
    """A named ResourceClaim holding ``devices`` over ``[allocated, released)``; returns its index."""
    c = Claim(namespace, name, _uuid("claim", sc.name, sc.seed, namespace, name), node, list(requests),
              _results(sc, node, requests, devices), created, allocated, released, labels=dict(labels or {}))
    sc.claims.append(c)
    return len(sc.claims) - 1


def _hold(sc: Scenario, p: Pod, claim_idx: int, containers: dict) -> None:
    """The pod's units on the claim's devices (admin-access results hold nothing), each attributed to the
    container that references the device's request."""
    c = sc.claims[claim_idx]
    for request, name, admin in c.results:
        if admin:
            continue
        d = device(sc, c.node, name)
        container = next((k for k, reqs in containers.items() if reqs is None or request in reqs), None)
        if container is None:
            raise ValueError(f"no container of {p.name} references request {request}")
        p.units.append(Unit(entity=d.entity, resource="dra", share=device_share(sc, d)))
        sc.entities[d.entity].intervals.append((p.start, p.hold_end, p.idx, container, None, False))
        sc.dra_held[(p.idx, d.entity)] = (claim_idx, d.name)


def _containers(p: Pod, container_requests: dict | None) -> dict:
    """container -> requests it references; containers named in ``container_requests`` beyond the pod's first
    are added (gpu-test4 style: one container per MIG request)."""
    if not container_requests:
        return {p.containers[0].name: None}
    for cname in container_requests:
        if all(c.name != cname for c in p.containers):
            first = p.containers[0]
            p.containers.append(Container(cname, first.image, {}, cpu=first.cpu, memory=first.memory))
    return {k: (None if v is None else list(v)) for k, v in container_requests.items()}


def template_pod(sc: Scenario, namespace: str, name: str, template: Template, devices: list[str], *, node: str,
                 start: float, pod_claim: str = "gpu", container_requests: dict | None = None, **pod) -> Pod:
    """A pod whose claim ``pod_claim`` comes from ``template``: the claim generated for it holds ``devices``
    (none for an admin-access template) while the pod holds (``Scenario.add_pod`` keyword arguments in ``pod``,
    without units)."""
    p = sc.add_pod(namespace, name, node=node, start=start, **pod)
    containers = _containers(p, container_requests)
    c = Claim(namespace, generated_name(sc, name, pod_claim), "", node, list(template.requests),
              _results(sc, node, template.requests, devices), p.created, p.start, p.hold_end, p.hold_end,
              consumers=[p.idx], template=template.name, owner=p.idx, pod_claim=pod_claim)
    c.uid = _uuid("claim", sc.name, sc.seed, namespace, c.name)
    sc.claims.append(c)
    sc.pod_claims.setdefault(p.idx, []).append(PodClaim(pod_claim, len(sc.claims) - 1, template.name, containers))
    _hold(sc, p, len(sc.claims) - 1, containers)
    return p


def consumer_pod(sc: Scenario, namespace: str, name: str, claim_idx: int, *, start: float,
                 pod_claim: str = "shared-gpu", **pod) -> Pod:
    """A pod consuming the named claim ``claim_idx`` (on the claim's node) while it holds."""
    c = sc.claims[claim_idx]
    if c.namespace != namespace:
        raise ValueError("a pod consumes claims of its own namespace only")
    p = sc.add_pod(namespace, name, node=c.node, start=start, **pod)
    if not (c.allocated <= p.start and p.hold_end <= c.released):
        raise ValueError(f"{name} runs outside the allocation of claim {c.name}")
    containers = _containers(p, None)
    c.consumers.append(p.idx)
    sc.pod_claims.setdefault(p.idx, []).append(PodClaim(pod_claim, claim_idx, None, containers))
    _hold(sc, p, claim_idx, containers)
    return p


def extended_resource_pod(sc: Scenario, namespace: str, name: str, devices: list[str], *, node: str,
                          start: float, **pod) -> Pod:
    """A pod asking ``nvidia.com/gpu: len(devices)`` on a DRA node, served by a claim the scheduler made."""
    p = sc.add_pod(namespace, name, node=node, start=start, gpus={EXTENDED_RESOURCE: len(devices)}, **pod)
    req = Request("container-0-request-0", GPU_CLASS, count=len(devices))
    c = Claim(namespace, generated_name(sc, name, "extended-resources"), "", node, [req],
              _results(sc, node, [req], devices), p.created, p.start, p.hold_end, p.hold_end,
              consumers=[p.idx], owner=p.idx, extended=True)
    c.uid = _uuid("claim", sc.name, sc.seed, namespace, c.name)
    sc.claims.append(c)
    containers = {p.containers[0].name: None}
    sc.pod_claims.setdefault(p.idx, []).append(PodClaim("", len(sc.claims) - 1, None, containers, extended=True))
    _hold(sc, p, len(sc.claims) - 1, containers)
    return p


def check(sc: Scenario) -> None:
    """No device is held by two claims at once, nor a GPU's whole device while one of its MIG devices is."""
    spans: dict = {}  # (node, physical GPU minor) -> [(from, to, claim, device)]
    for c in sc.claims:
        for _request, name, admin in c.results:
            if not admin:
                d = device(sc, c.node, name)
                spans.setdefault((c.node, d.minor), []).append((c.allocated, c.released, c.name, d))
    for key, items in spans.items():
        items.sort(key=lambda x: (x[0], x[1], x[2], x[3].name))
        for i, (_a1, b1, n1, d1) in enumerate(items):
            for a2, _b2, n2, d2 in items[i + 1:]:
                if a2 >= b1:
                    break
                if d1.name == d2.name or "gpu" in (d1.type, d2.type):
                    raise ValueError(f"GPU {key}: {d1.name} ({n1}) and {d2.name} ({n2}) held at once")


# ------------------------------------------------------------------------------ what pods show of it
def pod_fields(sc: Scenario, p: Pod, spec: dict, status: dict) -> None:
    """Add to a pod's JSON ``spec`` and ``status`` what DRA puts there: ``spec.resourceClaims``, the containers'
    ``resources.claims``, ``status.resourceClaimStatuses`` (template claims only, as the API server fills it),
    ``status.extendedResourceClaimStatus``."""
    entries = [e for e in sc.pod_claims.get(p.idx, ()) if not e.extended]
    if entries:
        spec["resourceClaims"] = [
            {"name": e.name, "resourceClaimTemplateName": e.template} if e.template
            else {"name": e.name, "resourceClaimName": sc.claims[e.claim].name} for e in entries]
        for c in spec["containers"]:
            refs = [{"name": e.name, **({"request": r} if r else {})} for e in entries if c["name"] in e.containers
                    for r in (e.containers[c["name"]] or [None])]
            if refs:
                c["resources"]["claims"] = refs
        if "startTime" in status:
            generated = [{"name": e.name, "resourceClaimName": sc.claims[e.claim].name} for e in entries if e.template]
            if generated:
                status["resourceClaimStatuses"] = generated
    extended = next((sc.claims[e.claim] for e in sc.pod_claims.get(p.idx, ()) if e.extended), None)
    if extended is not None and "startTime" in status:
        status["extendedResourceClaimStatus"] = {
            "resourceClaimName": extended.name,
            "requestMappings": [{"containerName": p.containers[0].name, "resourceName": EXTENDED_RESOURCE,
                                 "requestName": extended.requests[0].name}],
        }
