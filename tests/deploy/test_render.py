"""deploy/render.py renders every overlay, as `kubectl kustomize` does, and kubernetes-validate accepts the result."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from deploy import render as renderer
from deploy import validate as validator
from tests.deploy.conftest import OVERLAYS, REPO, objects_of, one


def test_every_overlay_renders_with_its_parts(rendered):
    assert set(OVERLAYS) >= {"production", "minimal", "production-networkpolicy"}
    kinds = {name: {o["kind"] for o in objects} for name, objects in rendered.items()}
    base = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "Service",
            "PodDisruptionBudget", "Job"}
    for name in OVERLAYS:
        assert base <= kinds[name], name
    assert {"ServiceMonitor", "PrometheusRule"} <= kinds["production"]
    assert not {"ServiceMonitor", "PrometheusRule", "NetworkPolicy"} & kinds["minimal"]
    assert "NetworkPolicy" not in kinds["production"]  # opt-in only
    assert "NetworkPolicy" in kinds["production-networkpolicy"]
    for name, objects in rendered.items():
        for o in objects:
            if o["kind"] not in renderer.CLUSTER_SCOPED:
                assert o["metadata"]["namespace"] == "gpufinops", (name, o["kind"], o["metadata"]["name"])
            for c in [*o.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []),
                      *o.get("spec", {}).get("template", {}).get("spec", {}).get("initContainers", [])]:
                assert c["image"] == "registry.example.com/gpufinops:0.1.0", (name, c["name"])


def _canonical(value):
    """Order-free form for comparing two renderers: lists of named items sorted by name."""
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_canonical(v) for v in value]
        if items and all(isinstance(i, dict) and "name" in i for i in items):
            items = sorted(items, key=lambda i: i["name"])
        return items
    return value


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_renderer_matches_kubectl_kustomize(overlay, rendered):
    """Where kubectl is installed, its Kustomize renders the same objects in the same order."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: deploy/render.py is the only renderer here")
    version = subprocess.run([kubectl, "version", "--client", "-o", "json"], capture_output=True, text=True,
                             timeout=60)
    kustomize = json.loads(version.stdout or "{}").get("kustomizeVersion", "") if version.returncode == 0 else ""
    if not kustomize or kustomize.lstrip("v").split(".")[0] in ("2", "3"):
        pytest.skip(f"kubectl's Kustomize ({kustomize or 'unknown'}) predates directories in `resources` "
                    "(kubectl >= 1.21 needed; docs/deploy.md)")
    out = subprocess.run([kubectl, "kustomize", str(OVERLAYS[overlay])], capture_output=True, text=True, timeout=120)
    if out.returncode != 0 and "unknown command" in out.stderr:
        pytest.skip(f"this kubectl has no kustomize: {out.stderr.strip()[:200]}")
    assert out.returncode == 0, out.stderr
    theirs = [d for d in yaml.safe_load_all(out.stdout) if d]
    ours = rendered[overlay]
    ident = lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])  # noqa: E731
    assert [ident(o) for o in ours] == [ident(o) for o in theirs]
    for a, b in zip(ours, theirs, strict=True):
        assert _canonical(a) == _canonical(b), ident(a)


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_kubernetes_validate_strict(overlay, rendered, tmp_path):
    path = tmp_path / f"{overlay}.yaml"
    path.write_text(renderer.to_yaml(rendered[overlay]))
    checked, skipped, errors = validator.validate_file(path, validator.DEFAULT_VERSIONS)
    assert errors == []
    assert checked == len(rendered[overlay]) - skipped
    assert skipped == len(objects_of(rendered[overlay], "ServiceMonitor")) + len(
        objects_of(rendered[overlay], "PrometheusRule"))


def test_validation_is_strict_and_refuses_unknown_kinds(rendered, tmp_path):
    objects = [dict(o) for o in rendered["minimal"]]
    web = one(objects, "Deployment", "gpufinops-web")
    web["spec"] = {**web["spec"], "replicaz": 2}
    objects.append({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})
    path = tmp_path / "bad.yaml"
    path.write_text(renderer.to_yaml(objects))
    _, _, errors = validator.validate_file(path, ("1.37.0",))
    assert any("replicaz" in e for e in errors)
    assert any("Widget" in e and "no schema" in e for e in errors)


def test_validate_cli_and_render_cli(tmp_path):
    out = subprocess.run([sys.executable, "deploy/render.py", "--all", "--out", str(tmp_path)], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    files = sorted(tmp_path.glob("*.yaml"))
    assert {f.stem for f in files} == set(OVERLAYS)
    check = subprocess.run([sys.executable, "deploy/validate.py", *map(str, files)], cwd=REPO,
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "objects valid (strict" in check.stdout


def test_renderer_refuses_fields_outside_its_subset(tmp_path):
    (tmp_path / "kustomization.yaml").write_text("resources: []\ncommonLabels: {a: b}\n")
    with pytest.raises(renderer.RenderError, match="commonLabels"):
        renderer.render(tmp_path)


def test_strategic_merge_semantics():
    base = {"spec": {"containers": [{"name": "a", "image": "x", "env": [{"name": "A", "value": "1"}],
                                     "args": ["1", "2"]}, {"name": "b", "image": "y"}]}}
    patch = {"spec": {"containers": [{"name": "a", "env": [{"name": "B", "value": "2"}], "args": ["3"]},
                                     {"name": "b", "$patch": "delete"}]}}
    merged = renderer.merge(base, patch)
    (a,) = merged["spec"]["containers"]
    assert a["image"] == "x" and a["args"] == ["3"]
    assert [e["name"] for e in a["env"]] == ["B", "A"]
    assert renderer.rewrite_image("gpufinops:latest", [{"name": "gpufinops", "newTag": "1"}]) == "gpufinops:1"
    assert renderer.rewrite_image("other:2", [{"name": "gpufinops", "newTag": "1"}]) == "other:2"


def test_set_tag_moves_the_image_and_the_migration_job_together(tmp_path):
    copy = tmp_path / "k8s"
    shutil.copytree(REPO / "deploy" / "k8s", copy)
    overlay = copy / "overlays" / "production"
    renderer.set_tag(overlay, "1.4.2-rc.1")
    objects = renderer.render(overlay)
    (job,) = objects_of(objects, "Job")
    assert job["metadata"]["name"] == "gpufinops-migrate-1-4-2-rc-1"
    images = {c["image"] for o in objects if o["kind"] in ("Deployment", "Job")
              for c in o["spec"]["template"]["spec"]["containers"]}
    assert images == {"registry.example.com/gpufinops:1.4.2-rc.1"}
    with pytest.raises(renderer.RenderError):
        renderer.set_tag(overlay, "bad tag")
    assert Path(overlay / "kustomization.yaml").read_text().count('newTag: "1.4.2-rc.1"') == 1
