"""Scenarios: the declarative `demo` builds what it is pinned to; the simulator's modules depend on each other one
way."""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from devtools.simulator.builders import SpecError, build_from_spec, name, when
from devtools.simulator.model import Scenario
from devtools.simulator.scenarios import build_scenario
from tests.devtools.conftest import END

# sha256 of `fingerprint()` of the scenarios. Until the workload owners and health events (issues 12 and 14) they
# pinned the declarative demo to the imperative builder of apps/simulator/builders.py (commit 607fba3). They
# changed on purpose when: every pod gained `owner_parent` and the scenario its ReplicaSets and Jobs
# (`controllers`: Deployments own the ReplicaSets, a CronJob the thumbs Jobs, a JobSet two new Jobs), health
# events (`health`: XID 64/48/79, a row remap failure, ECC and remapped rows, HW power brake, a vanished GPU, a
# rogue process, the thermal throttling of llm-pretrain's rank 1) and activity overrides (`overrides`: a
# straggling rank) and the demo three new workloads appended after the others (a PyTorchJob, a JobSet, an
# idle-held notebook). Activity and ledger figures of the pods that were there before did not change. The tiny
# and large fingerprints changed only because the fingerprint now covers those new fields.
# Issue 25: the demo's llama-70b became a LeaderWorkerSet (leader llama-70b-0, worker llama-70b-0-1, same GPUs,
# times and activity kind) and StatefulSets joined the controllers (every scenario with StatefulSet pods moved).
# Issue 22: the demo's whisper (A100 3g.40gb) became an over-provisioned inference service (`infer_light`: busy
# 10-26 %, never idle) for the savings' right-sizing; only its activity kind moved the demo's pins.
# Issue 22 (savings' cheaper model): the demo gained one pod appended after the others, the light OCR service
# `ocr` (a Deployment, `infer_light`) on a100-mig-0's otherwise free whole GPU 7, whose peaks fit an L4; the pods that
# were there before kept their activity. (The DRA add-on's weekly rhythm moved no pin: these are of the demo
# without it, tests/devtools/test_dra_scenarios.py checks the add-on.)
FINGERPRINTS = {
    ("demo", 0, 7): "5f612525960e187840a418ae5f706add3c4b7a89444bb1d739fb5d5017e1d03c",
    ("demo", 0, 8): "824fc4d427e7e6563f5245616b4f6a0daeaaddbdcb2f7f4d9f0a745a338e7981",
    ("demo", 3, 7): "494507a04a0bab2b62886c46ab6049b26c66ccce81639df0140d9b2831543f59",
    ("demo", 7, 2): "8d85af1d54c7c5f7477a491d247d30736e60c454fd838559addd1417f800c9c2",
    ("demo", 0, 7.5): "f1be3d4f6fd2d0fe1773cf4bc65efdb5b0d76cace185a837d3a00abeab19cc90",
    ("tiny", 0, 1): "b3f81892be04ca21efc8c4a4e9046e1a2ece80efb9eba83e6b12da23e8262d17",
    # issue 19: the mixed cluster (device plugin, MIG, time-slicing, DRA, DRA MIG, HAMi) and its variants; the
    # fingerprint covers DRA and HAMi only where a scenario has them, so the pins above did not move.
    ("mixed", 0, 3): "6c8a0a435ecc9ba01f58d6115257a6ff740914c11cf68673f748ad9997048f4b",
    ("mixed-v1beta1", 0, 3): "969993b862c989b75973025d6bc315a394659a08931f652983bc663615be763f",
    ("mixed-noattr", 0, 3): "9cbdbd16def99b4c6b9e65002cc01f7816bc955f75b788d5e422bb713642c1fc",
}
LARGE_FINGERPRINT = "6af2ceb10e2bdc69783fd8c88dc5dbef1aba838497bed6b7d88f2bd2c8355cdd"  # every=25


def _canon(x):  # type: ignore[no-untyped-def]
    """Dataclasses field by field, dicts sorted, numbers as floats (a time is the same time as int or float)."""
    t = type(x)
    if t is float or t is int:
        return repr(float(x))
    if t is str or t is bool or x is None:
        return x
    if t is dict:
        return [[_canon(k), _canon(v)] for k, v in sorted(x.items(), key=lambda kv: repr(kv[0]))]
    if t is list or t is tuple:
        return [_canon(v) for v in x]
    assert dataclasses.is_dataclass(x), t
    return {"@" + t.__name__: {k: _canon(v) for k, v in vars(x).items()}}


def fingerprint(sc: Scenario, every: int = 1) -> str:
    """Everything a scenario holds: nodes (labels, capacity), GPU entities with their holders, pods (uids,
    containers, units, activity kind, times, owners), namespaces, ReplicaSets and Jobs, Kueue workloads, queues
    and flavors, XID and health events, activity overrides. ``every``: only every n-th entity, pod and
    controller (the large scenario has 38,883 pods)."""
    doc = {
        "cluster": sc.cluster_name, "t0": repr(sc.t0), "t1": repr(sc.t1),
        "namespaces": _canon(sc.namespaces), "ns_created": _canon(sc.ns_created),
        "nodes": _canon(sc.nodes), "entities": _canon(sc.entities[::every]), "pods": _canon(sc.pods[::every]),
        "workloads": _canon(sc.workloads), "cluster_queues": _canon(sc.cluster_queues),
        "flavors": _canon(sc.flavors), "local_queues": _canon(sc.local_queues),
        "xid_events": _canon(sc.xid_events),
        "controllers": _canon(list(sc.controllers.values())[::every]),
        "health": _canon(sc.health), "overrides": _canon(sc.overrides),
    }
    if sc.dra_versions or sc.hami:  # GPUs handed out by DRA and HAMi (none before: the pins above stay)
        doc["accelerators"] = _canon({
            "dra_versions": sc.dra_versions, "dra_attribution": sc.dra_attribution, "devices": sc.dra_devices,
            "other_slices": sc.dra_other_slices, "templates": sc.templates, "claims": sc.claims,
            "pod_claims": sc.pod_claims, "dra_held": sc.dra_held, "hami": sc.hami, "hami_allocs": sc.hami_allocs,
            "node_annotations": sc.node_annotations,
        })
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


@pytest.mark.parametrize(("scenario", "seed", "days"), list(FINGERPRINTS))
def test_it_builds_what_it_is_pinned_to(scenario, seed, days):
    # the demo's pins are of its own cases (its DRA node group and HAMi node: test_dra_scenarios.py)
    with_dra = False if scenario == "demo" else None
    sc = build_scenario(scenario, seed=seed, end=END, days=days, with_dra=with_dra)
    assert fingerprint(sc) == FINGERPRINTS[(scenario, seed, days)]


@pytest.mark.slow
def test_it_builds_the_large_scenario_it_is_pinned_to():
    sc = build_scenario("large", seed=0, end=END, days=7)
    assert (len(sc.nodes), len(sc.pods)) == (1250, 38883)
    assert fingerprint(sc, every=25) == LARGE_FINGERPRINT


def test_it_reads_times_and_names_from_the_description():
    sc = Scenario("demo", 5, END, 7)
    assert when(sc, "T0+1d+3h") == sc.t0 + 27 * 3600
    assert when(sc, "T1-6h") == sc.t1 - 6 * 3600
    assert when(sc, "T0+1d+12h+30m") == sc.t0 + 36.5 * 3600
    assert when(sc, "T0+7m") == sc.t0 + 300  # on the 5-minute grid
    assert name(sc, "thumbs-{n:03}", n=7) == "thumbs-007"
    assert name(sc, "pod-{pod}-x", pod="p") == "pod-p-x"
    assert name(sc, "a-{h5:emb,i}", i=1) != name(sc, "a-{h5:emb,i}", i=2)
    assert len(name(sc, "{rs:embedder}")) == 10
    for bad in ("T2+1h", "T0+1x", "1h"):
        with pytest.raises(SpecError, match="bad time"):
            when(sc, bad)
    with pytest.raises(SpecError, match="unknown placeholder"):
        name(sc, "{nope}")


def test_it_refuses_what_it_does_not_know():
    spec = {"namespaces": {}, "nodes": [], "workloads": [{"kind": "pod", "namespace": "a", "name": "p",
                                                           "node": None, "start": None, "colour": "red"}]}
    with pytest.raises(SpecError, match="unknown keys"):
        build_from_spec(Scenario("x", 0, END, 1), spec)
    spec["workloads"] = [{"kind": "deployment"}]
    with pytest.raises(SpecError, match="unknown entry kind"):
        build_from_spec(Scenario("x", 0, END, 1), spec)
    with pytest.raises(ValueError, match="unknown scenario"):
        build_scenario("nope", end=END)


def test_it_reads_owner_chains_overrides_and_health_events():
    sc = Scenario("x", 0, END, 1)
    sc.add_node("n", "H100", 8, {})
    spec = {"namespaces": {"a": {}}, "nodes": [], "health": [
        {"node": "n", "gpu": 1, "xid": 79, "from": "T0+1h", "until": "T0+2h"},
        {"node": "n", "gpu": 1, "vanish": True, "from": "T0+2h", "until": "T0+3h"},
        {"node": "n", "gpu": 2, "clock_events": ["hw_thermal"], "from": "T0+1h", "until": "T0+2h"},
        {"node": "n", "gpu": 2, "counter": "ecc_dbe", "increment": 2, "from": "T0+1h+10m"},
        {"node": "n", "gpu": 2, "remap_failure": True, "from": "T0+4h"},
        {"node": "n", "gpu": 3, "rogue": True, "from": "T0", "until": "T0+1h"},
    ], "workloads": [
        {"kind": "pod", "namespace": "a", "name": "w-{i}", "node": "n", "start": "T0", "gpus": {"nvidia.com/gpu": 1},
         "owner": ["Job", "w-{i}", "JobSet", "w"], "act": "train_fast",
         "replicas": [{"units": {"whole": [4]}}, {"units": {"whole": [5]},
                      "overrides": [{"unit": 0, "from": "T0+1h", "until": "T0+3h", "act": "straggler"}]}]},
    ]}
    build_from_spec(sc, spec)
    sc.finalize()
    w0, w1 = sc.pods
    assert (w0.owner, w0.owner_parent) == (("Job", "w-0"), ("JobSet", "w"))
    assert {k: c.owner for k, c in sc.controllers.items()} == {("a", "Job", "w-0"): ("JobSet", "w"),
                                                               ("a", "Job", "w-1"): ("JobSet", "w")}
    assert sc.overrides == {(w1.idx, w1.units[0].entity): [(sc.t0 + 3600, sc.t0 + 3 * 3600, "straggler")]}
    g1, g2 = sc.gpu_entity("n", 1).idx, sc.gpu_entity("n", 2).idx
    assert sc.xid_events[g1] == [(sc.t0 + 3600, sc.t0 + 7200, 79)]
    assert sc.health[g1].gaps == [(sc.t0 + 7200, sc.t0 + 3 * 3600)]
    assert sc.health[g2].throttle == [(sc.t0 + 3600, sc.t0 + 7200, 0x40)]
    assert sc.health[g2].counters == [(sc.t0 + 4200, "ecc_dbe", 2)]
    assert sc.health[g2].remap_failure_from == sc.t0 + 4 * 3600
    for bad in ({"node": "n", "gpu": 1, "xid": 79, "from": "T0"}, {"node": "n", "gpu": 1, "from": "T0"},
                {"node": "n", "gpu": 1, "clock_events": ["hot"], "from": "T0", "until": "T1"},
                {"node": "n", "gpu": 1, "counter": "sbe", "from": "T0"},
                {"node": "n", "gpu": 1, "rogue": True, "vanish": True, "from": "T0", "until": "T1"}):
        with pytest.raises(SpecError):
            build_from_spec(Scenario("x", 0, END, 1), {"namespaces": {}, "nodes": [{"name": "n", "model": "L4",
                                                                                    "gpus": 2}],
                                                        "health": [bad], "workloads": []})
    with pytest.raises(SpecError, match="bad owner"):
        build_from_spec(Scenario("x", 0, END, 1), {"namespaces": {}, "nodes": [], "workloads": [
            {"kind": "pod", "namespace": "a", "name": "p", "node": None, "start": None, "owner": ["Job", "a", "b"]}]})


def test_the_demo_has_owners_of_every_kind(demo):
    from tests.oracle import expected_workload

    kinds = {expected_workload(p).split("/")[0] for p in demo.pods}
    assert kinds == {"Deployment", "Job", "CronJob", "JobSet", "PyTorchJob", "StatefulSet", "LeaderWorkerSet", "Pod"}
    parents = {c.owner[0] for c in demo.controllers.values() if c.owner}
    assert parents == {"Deployment", "CronJob", "JobSet", "LeaderWorkerSet", "Pod"}  # Pod: an LWS group's leader
    assert any(c.kind == "Job" and c.owner is None for c in demo.controllers.values())  # bare (Kueue) Jobs
    assert any(c.suspended for c in demo.controllers.values())  # a quota-pending workload's suspended Job


SIMULATOR = Path(__file__).resolve().parents[2] / "devtools" / "simulator"
# Module -> the simulator modules it may import: the dependencies point one way, from the servers down
# to the model, which imports nothing of the simulator.
ALLOWED = {
    "model": set(),
    "promql": set(),
    "serving": set(),
    "builders": {"model"},
    "dra": {"model"},
    "hami": {"model"},
    "scenarios": {"builders", "dra", "hami", "model", "scenarios"},
    "objects": {"dra", "hami", "model"},
    "dra_objects": {"dra", "model", "objects"},
    "exposition": {"dra", "model"},
    "k8s_api": {"dra", "dra_objects", "model", "objects", "exposition", "serving"},
    "prometheus_api": {"model", "exposition", "promql", "serving"},
}


def _simulator_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: from . import x / from .x import y / from ..x import y
                if node.level == 1 and path.parent.name == "simulator":
                    found |= {module.split(".")[0]} if module else {a.name for a in node.names}
                else:
                    found |= {module.split(".")[0] or path.parent.name} if module else {"scenarios"}
            elif module.startswith("devtools.simulator."):
                found.add(module.split(".")[2])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith("devtools.simulator.")}
    return found


@pytest.mark.parametrize("module", sorted(ALLOWED))
def test_its_modules_import_one_way(module):
    path = SIMULATOR / f"{module}.py"
    paths = [path] if path.exists() else sorted((SIMULATOR / module).glob("*.py"))
    assert paths
    for p in paths:
        assert _simulator_imports(p) <= ALLOWED[module], p
    assert {p.stem for p in SIMULATOR.glob("*.py")} - {"__init__"} <= set(ALLOWED)
