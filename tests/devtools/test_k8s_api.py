"""The simulated API server through the official kubernetes client."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from kubernetes import client, config

from devtools.simulator.objects import k8s_objects


@pytest.fixture
def api(served, tmp_path):
    served.set_time(served.scenario.end)
    served.set_fault(None)
    path = served.write_kubeconfig(tmp_path / "kubeconfig")
    return config.new_client_from_config(str(path))


def _pages(fn, limit, **kw):
    items, cont, pages = [], None, 0
    while True:
        r = fn(limit=limit, _continue=cont, **kw)
        pages += 1
        items += r.items if hasattr(r, "items") and not isinstance(r, dict) else r["items"]
        cont = r.metadata._continue if not isinstance(r, dict) else r["metadata"].get("continue")
        if not cont:
            return items, pages


def test_it_lists_core_objects_across_pages_into_client_models(api, demo):
    v1 = client.CoreV1Api(api)
    nodes, pages = _pages(v1.list_node, 3)
    assert pages > 1
    assert all(isinstance(n, client.V1Node) for n in nodes)
    assert sorted(n.metadata.name for n in nodes) == sorted(n.name for n in demo.nodes)
    h100 = next(n for n in nodes if n.metadata.name == "h100-train-0")
    assert h100.status.allocatable["nvidia.com/gpu"] == "8"
    assert h100.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    pods, pages = _pages(v1.list_pod_for_all_namespaces, 5)
    assert pages > 3
    assert all(isinstance(p, client.V1Pod) for p in pods)
    expected = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in k8s_objects(demo, "pods", demo.end)}
    assert {(p.metadata.namespace, p.metadata.name) for p in pods} == expected
    running = [p for p in pods if p.status.phase == "Running"]
    assert running and all(p.status.start_time is not None and p.spec.node_name for p in running)
    ns_pods, _ = _pages(lambda **kw: v1.list_namespaced_pod("ml-training", **kw), 2)
    assert ns_pods and all(p.metadata.namespace == "ml-training" for p in ns_pods)
    namespaces = v1.list_namespace().items
    assert {n.metadata.name for n in namespaces} >= {"ml-training", "notebooks", "llm-serving", "batch", "sandbox"}
    assert v1.read_node("a100-0").spec.unschedulable is True


def test_it_lists_kueue_objects_in_v1beta2_and_v1beta1(api):
    co = client.CustomObjectsApi(api)
    g = "kueue.x-k8s.io"
    for version in ("v1beta2", "v1beta1"):
        cqs = co.list_cluster_custom_object(g, version, "clusterqueues")
        assert cqs["apiVersion"] == f"{g}/{version}" and cqs["kind"] == "ClusterQueueList"
        research = next(c for c in cqs["items"] if c["metadata"]["name"] == "research-cq")
        cohort_key = "cohortName" if version == "v1beta2" else "cohort"
        assert research["spec"][cohort_key] == "gpu-cohort"
        gpu = next(r for r in research["status"]["flavorsReservation"][0]["resources"] if r["name"] == "nvidia.com/gpu")
        assert gpu == {"name": "nvidia.com/gpu", "total": "24", "borrowed": "8"}
        wls, pages = _pages(
            lambda v=version, **kw: co.list_custom_object_for_all_namespaces(g, v, "workloads", **kw), 2
        )
        assert pages > 2
        pending = [
            w
            for w in wls
            if not any(c["type"] == "QuotaReserved" and c["status"] == "True" for c in w["status"]["conditions"])
        ]
        assert len(pending) == 2
        lqs = co.list_namespaced_custom_object(g, version, "ml-training", "localqueues")["items"]
        assert [q["spec"]["clusterQueue"] for q in lqs] == ["research-cq"]
        usage_key = "flavorsUsage" if version == "v1beta2" else "flavorUsage"
        assert usage_key in lqs[0]["status"]
        flavors = co.list_cluster_custom_object(g, version, "resourceflavors")["items"]
        assert {f["metadata"]["name"] for f in flavors} == {"h100", "a100", "l4"}
        one = co.get_namespaced_custom_object(g, version, "ml-training", "localqueues", "research-lq")
        assert one["metadata"]["name"] == "research-lq"


def test_it_filters_with_label_and_field_selectors(api, demo):
    v1 = client.CoreV1Api(api)
    on_node = v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=h100-train-2").items
    assert on_node and all(p.spec.node_name == "h100-train-2" for p in on_node)
    pending = v1.list_pod_for_all_namespaces(field_selector="status.phase=Pending").items
    assert len(pending) == 3 and all(p.spec.node_name is None for p in pending)
    not_running = v1.list_pod_for_all_namespaces(field_selector="status.phase!=Running,metadata.namespace=batch").items
    assert all(p.status.phase != "Running" and p.metadata.namespace == "batch" for p in not_running)
    assert {p.metadata.name for p in v1.list_pod_for_all_namespaces(label_selector="team=vision").items} == {
        "jupyter-carol-0"
    }
    jup = v1.list_pod_for_all_namespaces(label_selector="app in (jupyter),team!=vision").items
    assert jup and all(p.metadata.labels["app"] == "jupyter" and p.metadata.labels.get("team") != "vision" for p in jup)
    queued = v1.list_pod_for_all_namespaces(label_selector="kueue.x-k8s.io/queue-name").items
    assert queued and all("kueue.x-k8s.io/cluster-queue-name" in p.metadata.labels for p in queued)
    assert len(v1.list_namespace(label_selector="!team").items) == len(demo.namespaces) - 4
    pools = v1.list_node(label_selector="karpenter.sh/nodepool in (h100-train, h100-mig)").items
    assert len(pools) == 5


def test_it_serves_the_state_as_of_the_simulated_time(api, served, demo):
    v1 = client.CoreV1Api(api)
    t = demo.start + timedelta(days=1, hours=3)
    served.set_time(t)
    names = {p.metadata.name for p in v1.list_namespaced_pod("sandbox").items}
    assert "scratch-dave" in names
    served.set_time(demo.start + timedelta(days=1, hours=7, seconds=-10))
    dave = v1.read_namespaced_pod("scratch-dave", "sandbox")
    assert dave.metadata.deletion_timestamp is not None
    served.set_time(demo.end)
    assert "scratch-dave" not in {p.metadata.name for p in v1.list_namespaced_pod("sandbox").items}


def test_a_list_read_again_is_its_encoded_page_and_every_other_list_is_built(served, demo):
    """The encoded pages are keyed by everything a LIST answer depends on: a repeat reuses one, a different page,
    selector, namespace or time builds its own, with its own items."""
    served.set_time(demo.end)
    served._pages.clear()  # the session's other reads may have filled it to its bound

    def get(path: str) -> dict:
        with urllib.request.urlopen(served.url + path, timeout=5) as r:
            return json.loads(r.read())

    first = get("/api/v1/pods?limit=4")
    built = len(served._pages)
    assert get("/api/v1/pods?limit=4") == first and len(served._pages) == built
    second = get("/api/v1/pods?limit=4&continue=" + first["metadata"]["continue"])
    on_node = get("/api/v1/pods?limit=4&fieldSelector=spec.nodeName%3Dh100-train-2")
    sandbox = get("/api/v1/namespaces/sandbox/pods?limit=4")
    earlier = get(f"/at/{(demo.start + timedelta(days=1, hours=3)).timestamp():.0f}/api/v1/namespaces/sandbox/pods")
    assert len(served._pages) == built + 4
    assert {p["metadata"]["name"] for p in second["items"]}.isdisjoint(p["metadata"]["name"] for p in first["items"])
    assert on_node["items"] and all(p["spec"]["nodeName"] == "h100-train-2" for p in on_node["items"])
    assert sandbox["items"] and all(p["metadata"]["namespace"] == "sandbox" for p in sandbox["items"])
    assert "scratch-dave" in {p["metadata"]["name"] for p in earlier["items"]}
    assert "scratch-dave" not in {p["metadata"]["name"] for p in get("/api/v1/namespaces/sandbox/pods")["items"]}


def test_it_answers_unknown_paths_with_a_404_status(served):
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(served.url + "/api/v1/secrets", timeout=5)
    body = json.loads(exc.value.read())
    assert exc.value.code == 404 and body["kind"] == "Status" and body["reason"] == "NotFound"
    for path in (
        "/version",
        "/api",
        "/api/v1",
        "/apis",
        "/apis/apps/v1",
        "/apis/batch/v1",
        "/apis/kueue.x-k8s.io/v1beta2",
        "/apis/kueue.x-k8s.io/v1beta1",
    ):
        with urllib.request.urlopen(served.url + path, timeout=5) as r:
            assert r.status == 200 and json.loads(r.read())


def test_it_injects_server_errors_and_timeouts(api, served):
    v1 = client.CoreV1Api(api)
    served.set_fault("500")
    with pytest.raises(client.ApiException) as exc:
        v1.list_node()
    assert exc.value.status == 500
    served.set_fault("timeout")
    with pytest.raises(Exception):  # noqa: B017 (urllib3 raises its own timeout types across versions)
        v1.list_node(_request_timeout=1)
    served.set_fault(None)
    assert v1.list_node().items


def test_it_lists_replicasets_and_jobs_with_their_owners_across_pages(api, served, demo):
    at = demo.t0 + 40 * 3600  # the PyTorchJob, the JobSet and a CronJob's Job run
    served.set_time(at)
    apps, batch = client.AppsV1Api(api), client.BatchV1Api(api)
    rs, pages = _pages(apps.list_replica_set_for_all_namespaces, 2)
    assert pages > 2 and all(isinstance(r, client.V1ReplicaSet) for r in rs)
    expected = {(c.namespace, c.name): c.owner for c in demo.controllers.values()
                if c.kind == "ReplicaSet" and c.visible(at)}
    assert {(r.metadata.namespace, r.metadata.name): _controller(r.metadata) for r in rs} == expected
    assert set(expected.values()) >= {("Deployment", "asr"), ("Deployment", "tts")}
    jobs, pages = _pages(batch.list_job_for_all_namespaces, 2)
    assert pages > 1 and all(isinstance(j, client.V1Job) for j in jobs)
    got = {(j.metadata.namespace, j.metadata.name): _controller(j.metadata) for j in jobs}
    assert got == {(c.namespace, c.name): c.owner for c in demo.controllers.values()
                   if c.kind == "Job" and c.visible(at)}
    assert got[("batch", "embed-shards-shard-1")] == ("JobSet", "embed-shards")
    assert ("CronJob", "thumbs") in got.values() and None in got.values()  # bare Kueue Jobs
    sets, _pages_seen = _pages(apps.list_stateful_set_for_all_namespaces, 2)
    owned = {(s.metadata.namespace, s.metadata.name): _controller(s.metadata) for s in sets}
    # A LeaderWorkerSet: its StatefulSet, and the group's worker StatefulSet owned by the leader pod.
    assert owned[("llm-serving", "llama-70b")] == ("LeaderWorkerSet", "llama-70b")
    assert owned[("llm-serving", "llama-70b-0")] == ("Pod", "llama-70b-0")
    assert None in owned.values()  # notebooks: StatefulSets of their own
    shard = batch.read_namespaced_job("embed-shards-shard-1", "batch")
    assert shard.spec.completion_mode == "Indexed" and shard.status.active == 1
    assert shard.metadata.owner_references[0].api_version == "jobset.x-k8s.io/v1alpha2"
    assert [j.metadata.name for j in batch.list_namespaced_job("ml-training").items] == [
        c.name for c in sorted(demo.controllers.values(), key=lambda c: c.name)
        if c.kind == "Job" and c.namespace == "ml-training" and c.visible(at)
    ]
    served.set_time(demo.t0 + 42 * 3600)  # the failed shard, its Job done (both go 3 h later)
    failed = batch.read_namespaced_job("embed-shards-shard-1", "batch")
    assert failed.status.failed == 1 and [c.type for c in failed.status.conditions] == ["FailureTarget", "Failed"]
    with pytest.raises(client.ApiException) as exc:
        batch.read_namespaced_job("nope", "batch")
    assert exc.value.status == 404


def _controller(meta):  # type: ignore[no-untyped-def]
    refs = [r for r in meta.owner_references or [] if r.controller]
    return (refs[0].kind, refs[0].name) if refs else None


def test_pods_name_their_controller_and_the_product_resolves_every_workload(api, served, demo):
    from apps.ingest.collectors.kubernetes import read_owners, read_snapshot
    from apps.inventory.models import Cluster
    from tests.oracle import expected_workload

    seen: set = set()
    for hours in (40, 48, 140, 168):
        at = demo.t0 + hours * 3600
        served.set_time(at)
        owners, error = read_owners(api)
        assert error == ""
        snap = read_snapshot(Cluster(name="probe"), api)
        by_name = {(p.namespace, p.name): p for p in demo.pods}
        for info in snap.pods:
            pod = by_name[(info.namespace, info.name)]
            assert info.owner == pod.owner if pod.owner and pod.owner[0] != "Pod" else info.owner is None
            assert snap.workload_of(info) == expected_workload(pod), info.name
            seen.add(expected_workload(pod).split("/")[0])
    assert seen == {"Deployment", "Job", "CronJob", "JobSet", "PyTorchJob", "StatefulSet", "LeaderWorkerSet", "Pod"}
    served.set_time(demo.t0 + 38 * 3600)
    master = client.CoreV1Api(api).read_namespaced_pod("llama-sft-master-0", "ml-training")
    [ref] = master.metadata.owner_references
    assert (ref.api_version, ref.kind, ref.name, ref.controller) == ("kubeflow.org/v1", "PyTorchJob", "llama-sft", True)
    assert master.metadata.labels["training.kubeflow.org/operator-name"] == "pytorchjob-controller"
    assert master.spec.restart_policy == "OnFailure"
