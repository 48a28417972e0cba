"""Scenarios: the declarative `demo` builds exactly what the old 661-line builder built; the simulator's
modules depend on each other one way."""

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

# sha256 of `fingerprint()` of scenarios built by the imperative `build_demo` / `build_tiny` / `build_large`
# of apps/simulator/builders.py (commit 607fba3), computed before it was deleted.
OLD_BUILDER_FINGERPRINTS = {
    ("demo", 0, 7): "59b18598f64d5395238bb12264ae4c591918deddbbdd0f9271291c71ba6954e9",
    ("demo", 0, 8): "94973c0ab60887f12ae793a22317a80d6e9219e5d2528473e5e3ad2130993165",
    ("demo", 3, 7): "b0c9fb20720da9fdffbe63f5a035d2dcd6071705eddf0bec16164f3d7d6169e6",
    ("demo", 7, 2): "b3a67a60db2a219b2ccec2b76ed2168b5a1152c765b0ec4667dc0ba623d46025",
    ("demo", 0, 7.5): "21cc50d8dbc0a517dad2018617a5aa579cf2425f9b107df49e26dbeaf15967d6",
    ("tiny", 0, 1): "6bf86cc9792a58dd9dd6bd47fd56264deb9d2ab0fb8c4462f6f293a6a4b73c7b",
}
LARGE_FINGERPRINT = "e5b7e101298f20ebf4b169407a6b401a332e343387ee64b231ea0165851bc5b7"  # every=25; all: 1a50a5f1...


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
    containers, units, activity kind, times), namespaces, Kueue workloads, queues and flavors, XID events.
    ``every``: only every n-th entity and pod (the large scenario has 38,883 pods)."""
    doc = {
        "cluster": sc.cluster_name, "t0": repr(sc.t0), "t1": repr(sc.t1),
        "namespaces": _canon(sc.namespaces), "ns_created": _canon(sc.ns_created),
        "nodes": _canon(sc.nodes), "entities": _canon(sc.entities[::every]), "pods": _canon(sc.pods[::every]),
        "workloads": _canon(sc.workloads), "cluster_queues": _canon(sc.cluster_queues),
        "flavors": _canon(sc.flavors), "local_queues": _canon(sc.local_queues),
        "xid_events": _canon(sc.xid_events),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


@pytest.mark.parametrize(("scenario", "seed", "days"), list(OLD_BUILDER_FINGERPRINTS))
def test_it_builds_what_the_imperative_builder_built(scenario, seed, days):
    assert fingerprint(build_scenario(scenario, seed=seed, end=END, days=days)) == OLD_BUILDER_FINGERPRINTS[
        (scenario, seed, days)
    ]


@pytest.mark.slow
def test_it_builds_the_large_scenario_the_builder_built():
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


SIMULATOR = Path(__file__).resolve().parents[2] / "devtools" / "simulator"
# Module -> the simulator modules it may import: the dependencies point one way, from the servers down
# to the model, which imports nothing of the simulator.
ALLOWED = {
    "model": set(),
    "promql": set(),
    "serving": set(),
    "builders": {"model"},
    "scenarios": {"builders", "model", "scenarios"},
    "objects": {"model"},
    "exposition": {"model"},
    "k8s_api": {"model", "objects", "exposition", "serving"},
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
