"""The simulated API server serves DRA (resource.k8s.io) and HAMi objects as real clusters do, through the official
client: v1 on `mixed`, only v1beta1 on `mixed-v1beta1`, nothing (404) without DRA."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from kubernetes import client

from devtools.simulator.dra_objects import dra_objects
from devtools.simulator.k8s_api import start_server
from devtools.simulator.scenarios import build_scenario
from tests.devtools.conftest import END, MIXED_DAYS

MIG_NAME = re.compile(r"^gpu-\d+-mig-\d+g\d+gb-\d+-\d+$")
AT = END - timedelta(hours=10)  # the shared claim has two consumers, the reserved pair none


def _api(srv) -> client.ApiClient:
    cfg = client.Configuration()
    cfg.host = srv.url
    return client.ApiClient(cfg)


def _get(srv, path: str):
    with urllib.request.urlopen(srv.url + path, timeout=10) as r:
        return json.loads(r.read())


def _status(srv, path: str) -> int:
    try:
        with urllib.request.urlopen(srv.url + path, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        assert json.loads(exc.read())["reason"] == "NotFound"
        return exc.code


@pytest.fixture
def v1(mixed_served):
    mixed_served.set_time(AT)
    return client.ResourceV1Api(_api(mixed_served))


def _pages(fn, limit):
    items, cont, pages = [], None, 0
    while True:
        r = fn(limit=limit, _continue=cont)
        items += r.items
        pages += 1
        cont = r.metadata._continue
        if not cont:
            return items, pages


def test_it_publishes_each_dra_node_s_devices_in_its_pool(v1, mixed):
    slices = v1.list_resource_slice().items
    gpu = [s for s in slices if s.spec.driver == "gpu.nvidia.com"]
    assert {s.spec.node_name for s in gpu} == {"dra-h100-0", "dra-h100-1", "dra-mig-0"}
    assert all(s.spec.pool.name == s.spec.node_name and s.spec.pool.generation == 1 for s in gpu)
    assert all(s.metadata.owner_references[0].kind == "Node" for s in slices)
    h100 = next(s for s in gpu if s.spec.node_name == "dra-h100-0")
    assert [d.name for d in h100.spec.devices] == [f"gpu-{g}" for g in range(8)]
    dev = h100.spec.devices[3]
    assert dev.attributes["type"].string == "gpu" and dev.attributes["productName"].string == "NVIDIA H100 80GB HBM3"
    assert dev.attributes["uuid"].string == mixed.gpu_entity("dra-h100-0", 3).uuid
    assert dev.capacity["memory"].value == "81559Mi"
    # AKS MIG node: two slices of one pool; GPU 0 publishes its whole device beside its MIG devices
    aks = [s for s in gpu if s.spec.node_name == "dra-mig-0"]
    assert len(aks) == 2 and {s.spec.pool.resource_slice_count for s in aks} == {2}
    devices = [d for s in aks for d in s.spec.devices]
    whole = {d.attributes["uuid"].string for d in devices if d.attributes["type"].string == "gpu"}
    migs = [d for d in devices if d.attributes["type"].string == "mig"]
    assert {d.name for d in devices if d.attributes["type"].string == "gpu"} == {"gpu-0", "gpu-2", "gpu-3"}
    assert migs and all(MIG_NAME.match(d.name) for d in migs)
    assert all(d.attributes["uuid"].string.startswith("MIG-") for d in migs)
    parents = {d.attributes["parentUUID"].string for d in migs}
    assert mixed.gpu_entity("dra-mig-0", 0).uuid in whole & parents
    assert len(whole | parents) == 4  # physical GPUs: whole devices + parents not published whole
    assert {d.attributes["profile"].string for d in migs} == {"3g.40gb", "2g.20gb", "1g.10gb"}
    assert "gpu-0-mig-3g40gb-9-4" in {d.name for d in migs}
    # another driver's devices beside the GPUs: not GPUs
    [cd] = [s for s in slices if s.spec.driver == "compute-domain.nvidia.com"]
    assert cd.spec.node_name == "dra-h100-1" and {d.attributes["type"].string for d in cd.spec.devices} == {"channel"}
    classes = {c.metadata.name: c.spec for c in v1.list_device_class().items}
    assert classes["gpu.nvidia.com"].extended_resource_name == "nvidia.com/gpu"
    assert classes["mig.nvidia.com"].extended_resource_name is None
    assert "type == 'mig'" in classes["mig.nvidia.com"].selectors[0].cel.expression


def test_it_serves_claims_from_templates_shared_claims_idle_claims_and_admin_claims(v1, mixed):
    claims = {(c.metadata.namespace, c.metadata.name): c for c in v1.list_resource_claim_for_all_namespaces().items}
    pods = {(p.metadata.namespace, p.metadata.name): p
            for p in client.CoreV1Api(v1.api_client).list_pod_for_all_namespaces().items}
    # one claim per pod from a template: <pod>-<claim>-<5 chars>, owned by the pod, annotated, reserved for it
    ddp = next(p for (ns, name), p in pods.items() if name.startswith("ddp-dra-"))
    [status] = ddp.status.resource_claim_statuses
    claim = claims[("training", status.resource_claim_name)]
    assert re.fullmatch(re.escape(ddp.metadata.name) + r"-gpu-[0-9a-f]{5}", claim.metadata.name)
    assert claim.metadata.annotations == {"resource.kubernetes.io/pod-claim-name": "gpu"}
    [owner] = claim.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller) == ("Pod", ddp.metadata.name, ddp.metadata.uid, True)
    assert [r.device for r in claim.status.allocation.devices.results] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert {r.pool for r in claim.status.allocation.devices.results} == {"dra-h100-0"}
    assert [(r.resource, r.name, r.uid) for r in claim.status.reserved_for] == [
        ("pods", ddp.metadata.name, ddp.metadata.uid)]
    assert ddp.spec.resource_claims[0].resource_claim_template_name == "four-gpus"
    assert ddp.spec.containers[0].resources.claims[0].name == "gpu"
    # a named claim shared by pods of two teams of one namespace: both reserved, no claim status on the pods
    shared = claims[("inference", "shared-h100")]
    consumers = sorted(r.name for r in shared.status.reserved_for)
    assert consumers[0] == "eval-harness-0" and consumers[1].startswith("rag-api-")
    assert pods[("inference", "eval-harness-0")].metadata.labels["team"] == "research"
    assert "team" not in (pods[("inference", consumers[1])].metadata.labels or {})  # the namespace's: serving
    eval_pod = pods[("inference", "eval-harness-0")]
    assert eval_pod.spec.resource_claims[0].resource_claim_name == "shared-h100"
    assert eval_pod.status.resource_claim_statuses is None
    # allocated with no consumer left: the idle claim
    reserved = claims[("platform", "reserved-h100-pair")]
    assert [r.device for r in reserved.status.allocation.devices.results] == ["gpu-0", "gpu-1"]
    assert reserved.status.reserved_for is None and reserved.metadata.owner_references is None
    # the monitoring claim: every GPU of the node, admin access, holding nothing
    admin = next(c for (ns, _n), c in claims.items() if ns == "gpu-monitoring")
    assert len(admin.status.allocation.devices.results) == 8
    assert all(r.admin_access for r in admin.status.allocation.devices.results)
    assert admin.spec.devices.requests[0].exactly.allocation_mode == "All"
    # the extended-resource claim the scheduler made for a pod asking nvidia.com/gpu
    legacy = next(p for (_ns, name), p in pods.items() if name.startswith("legacy-cuda-"))
    ext = legacy.status.extended_resource_claim_status
    assert legacy.spec.resource_claims is None and legacy.spec.containers[0].resources.requests["nvidia.com/gpu"] == "1"
    assert ext.request_mappings[0].resource_name == "nvidia.com/gpu"
    ext_claim = claims[("batch", ext.resource_claim_name)]
    assert ext_claim.metadata.annotations == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert ext_claim.spec.devices.requests[0].name == ext.request_mappings[0].request_name
    # gpu-test4 style: one claim, two MIG requests, one container each
    pipe = next(p for (_ns, name), p in pods.items() if name.startswith("pipeline-"))
    assert [(c.name, [(r.name, r.request) for r in c.resources.claims]) for c in pipe.spec.containers] == [
        ("ctr0", [("mig-devices", "mig-2g")]), ("ctr1", [("mig-devices", "mig-1g")])]
    pipe_claim = claims[("inference", pipe.status.resource_claim_statuses[0].resource_claim_name)]
    assert [(r.request, r.device) for r in pipe_claim.status.allocation.devices.results] == [
        ("mig-2g", "gpu-1-mig-2g20gb-14-4"), ("mig-1g", "gpu-1-mig-1g10gb-19-6")]
    templates = {(t.metadata.namespace, t.metadata.name): t for t in
                 v1.list_resource_claim_template_for_all_namespaces().items}
    pair = templates[("inference", "mig-pair")].spec.spec.devices.requests
    assert [(r.name, r.exactly.device_class_name) for r in pair] == [("mig-2g", "mig.nvidia.com"),
                                                                     ("mig-1g", "mig.nvidia.com")]
    assert "'2g.20gb'" in pair[0].exactly.selectors[0].cel.expression
    assert templates[("training", "four-gpus")].spec.spec.devices.requests[0].exactly.count == 4


def test_a_generated_claim_goes_with_its_pod(mixed_served, mixed):
    api = client.ResourceV1Api(_api(mixed_served))
    run = next(p for p in mixed.pods if p.name.startswith("embed-007-"))
    mixed_served.set_time(run.start + 600)
    names = {c.metadata.name for c in api.list_namespaced_resource_claim("batch").items}
    assert any(n.startswith(run.name + "-gpu-") for n in names)
    mixed_served.set_time(run.finish + 600)  # the pod is still listed (Succeeded), its claim is gone
    assert not any(c.metadata.name.startswith(run.name) for c in api.list_namespaced_resource_claim("batch").items)
    pod = client.CoreV1Api(api.api_client).read_namespaced_pod(run.name, "batch")
    assert pod.status.phase == "Succeeded" and pod.status.resource_claim_statuses[0].resource_claim_name in names


def test_it_pages_the_dra_lists_and_strips_kind_from_their_items(v1, mixed_served, mixed):
    raw = _get(mixed_served, "/apis/resource.k8s.io/v1/resourceclaims?limit=3")
    assert raw["kind"] == "ResourceClaimList" and raw["apiVersion"] == "resource.k8s.io/v1"
    assert raw["metadata"]["continue"] and len(raw["items"]) == 3
    assert all("kind" not in o and "apiVersion" not in o for o in raw["items"])
    one = raw["items"][0]["metadata"]
    got = _get(mixed_served, f"/apis/resource.k8s.io/v1/namespaces/{one['namespace']}/resourceclaims/{one['name']}")
    assert (got["kind"], got["apiVersion"]) == ("ResourceClaim", "resource.k8s.io/v1")
    claims, pages = _pages(v1.list_resource_claim_for_all_namespaces, 3)
    expected = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in dra_objects(mixed, "resourceclaims", AT,
                                                                                         "v1")}
    assert pages > 3 and {(c.metadata.namespace, c.metadata.name) for c in claims} == expected
    slices, pages = _pages(v1.list_resource_slice, 2)
    assert pages == 3 and len(slices) == 5
    templates, pages = _pages(v1.list_resource_claim_template_for_all_namespaces, 2)
    assert pages > 2 and len(templates) == len(mixed.templates)
    assert {t.metadata.name for t in v1.list_namespaced_resource_claim_template("inference").items} == {
        "single-gpu", "mig-3g", "mig-pair"}


def test_a_v1beta1_cluster_serves_that_shape_only():
    sc = build_scenario("mixed-v1beta1", seed=0, end=END, days=MIXED_DAYS)
    srv = start_server(sc)
    try:
        srv.set_time(AT)
        groups = {g["name"]: g for g in _get(srv, "/apis")["groups"]}
        assert [v["version"] for v in groups["resource.k8s.io"]["versions"]] == ["v1beta1"]
        assert _get(srv, "/version")["minor"] == "32"
        for path in ("/apis/resource.k8s.io/v1", "/apis/resource.k8s.io/v1/resourceslices",
                     "/apis/resource.k8s.io/v1beta2/resourceclaims"):
            assert _status(srv, path) == 404, path
        raw = _get(srv, "/apis/resource.k8s.io/v1beta1/resourceslices")["items"]
        device = raw[0]["spec"]["devices"][0]
        assert set(device) == {"name", "basic"} and device["basic"]["attributes"]["type"] == {"string": "gpu"}
        api = client.ResourceV1beta1Api(_api(srv))
        claims = api.list_resource_claim_for_all_namespaces().items
        shared = next(c for c in claims if c.metadata.name == "shared-h100")
        assert shared.spec.devices.requests[0].device_class_name == "gpu.nvidia.com"
        assert len(shared.status.reserved_for) == 2
        classes = {c.metadata.name: c for c in api.list_device_class().items}
        assert "extendedResourceName" not in json.dumps(_get(srv, "/apis/resource.k8s.io/v1beta1/deviceclasses"))
        assert set(classes) >= {"gpu.nvidia.com", "mig.nvidia.com"}
        assert not any(c.metadata.annotations and "resource.kubernetes.io/extended-resource-claim"
                       in c.metadata.annotations for c in claims)
    finally:
        srv.stop()


def test_a_cluster_without_dra_answers_404_for_the_whole_group(served):
    assert "resource.k8s.io" not in {g["name"] for g in _get(served, "/apis")["groups"]}
    assert _get(served, "/version")["minor"] == "31"
    for path in ("/apis/resource.k8s.io", "/apis/resource.k8s.io/v1", "/apis/resource.k8s.io/v1/resourceslices",
                 "/apis/resource.k8s.io/v1beta1/resourceclaims", "/apis/resource.k8s.io/v1/deviceclasses"):
        assert _status(served, path) == 404, path
    with pytest.raises(client.ApiException) as exc:
        client.ResourceV1Api(_api(served)).list_resource_slice()
    assert exc.value.status == 404


def test_hami_nodes_register_their_gpus_and_pods_carry_their_devices(mixed_served, mixed):
    core = client.CoreV1Api(_api(mixed_served))
    mixed_served.set_time(AT)
    l4 = core.read_node("hami-l4-0")
    assert l4.metadata.labels["gpu"] == "on" and l4.status.capacity["nvidia.com/gpu"] == "20"
    register = l4.metadata.annotations["hami.io/node-nvidia-register"]
    assert register.endswith(":") and register.count(":") == 2
    fields = [d.split(",") for d in register[:-1].split(":")]
    assert [f[0] for f in fields] == [mixed.gpu_entity("hami-l4-0", g).uuid for g in (0, 1)]
    assert {tuple(f[1:5]) for f in fields} == {("10", "23034", "100", "NVIDIA-NVIDIA L4")}
    a100 = core.read_node("hami-a100-0")
    devices = json.loads(a100.metadata.annotations["hami.io/node-nvidia-register"])
    assert [d["id"] for d in devices] == [mixed.gpu_entity("hami-a100-0", g).uuid for g in (0, 1)]
    assert "index" not in devices[0] and devices[1]["index"] == 1  # HAMi >= 2.8 omits zero values
    assert {(d["devcore"], d["devmem"], d["type"]) for d in devices} == {(200, 81920, "NVIDIA-NVIDIA A100-SXM4-80GB")}
    assert not any(k.startswith("nvidia.com/") for k in a100.metadata.labels)  # no GFD labels on this one
    on_l4 = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=hami-l4-0").items
    pods = {p.metadata.name: p for p in on_l4}
    cache = next(p for name, p in pods.items() if name.startswith("feature-cache-"))
    uuid0 = mixed.gpu_entity("hami-l4-0", 0).uuid
    assert cache.metadata.annotations["hami.io/vgpu-devices-allocated"] == f"{uuid0},NVIDIA,6000,0:;;"  # + sidecar
    assert cache.metadata.annotations["hami.io/bind-phase"] == "success"
    assert cache.spec.scheduler_name == "hami-scheduler"
    assert cache.spec.containers[0].resources.limits["nvidia.com/gpumem"] == "6000"
    lee = pods["jupyter-lee-0"]
    uuid1 = mixed.gpu_entity("hami-l4-0", 1).uuid
    assert lee.metadata.annotations["hami.io/vgpu-devices-allocated"] == f"{uuid1},NVIDIA,11517,40:;"


def test_the_recorded_access_harness_classifies_the_dra_reads(mixed_served):
    from tests.harness.k8s_recorder import start_recorder

    recorder = start_recorder(mixed_served.url)
    try:
        cfg = client.Configuration()
        cfg.host = recorder.url
        api = client.ResourceV1Api(client.ApiClient(cfg))
        api.list_resource_slice(limit=2)
        api.list_resource_claim_for_all_namespaces()
        api.list_namespaced_resource_claim_template("inference")
        api.list_device_class()
        api.read_device_class("gpu.nvidia.com")
        _get(recorder, "/apis/resource.k8s.io")
        assert recorder.permissions == {("list", "resource.k8s.io", r) for r in (
            "resourceslices", "resourceclaims", "resourceclaimtemplates", "deviceclasses")} | {
            ("get", "resource.k8s.io", "deviceclasses")}
        assert [c.path for c in recorder.calls if not c.is_resource] == ["/apis/resource.k8s.io"]
    finally:
        recorder.stop()
