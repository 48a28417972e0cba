#!/usr/bin/env python3
"""Render the Kustomize overlays of deploy/k8s without kubectl: exactly the Kustomize subset they use.

    python deploy/render.py deploy/k8s/overlays/production            # YAML on stdout
    python deploy/render.py --all --out build/deploy                   # every overlay -> build/deploy/<name>.yaml
    python deploy/render.py --set-tag 0.2.0 deploy/k8s/overlays/production   # bump the image tag + Job name

Where `kubectl kustomize` (or `kustomize build`) is available it renders the same directories to the same
objects (tests/deploy/test_render.py compares the two when kubectl is installed). This renderer exists because
CI machines have no kubectl. Supported kustomization fields, with Kustomize's semantics:

* `resources` (and its old spelling `bases`): YAML files, or directories holding a kustomization (rendered first);
* `namespace`: set on every namespaced object; ServiceAccount subjects of (Cluster)RoleBindings that name a
  ServiceAccount of the set follow it (Kustomize's name-reference rule);
* `images`: `name` -> `newName` / `newTag` / `digest` in every container and init container;
* `patchesStrategicMerge`: strategic-merge patches matched by kind and name, with the Kubernetes merge keys of
  the lists used here (containers, initContainers, env, volumes, volumeMounts, ports) and `$patch: delete|replace`.

Any other field is an error, so a manifest change that needs more of Kustomize fails here first.
Depends only on PyYAML.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path
from typing import Any

import yaml

SUPPORTED = {"apiVersion", "kind", "resources", "bases", "namespace", "images", "patchesStrategicMerge"}
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
DEPLOY = Path(__file__).resolve().parent
OVERLAYS = DEPLOY / "k8s" / "overlays"

CLUSTER_SCOPED = {
    "Namespace", "Node", "PersistentVolume", "StorageClass", "ClusterRole", "ClusterRoleBinding",
    "CustomResourceDefinition", "PriorityClass", "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration", "APIService", "IngressClass", "RuntimeClass", "CSIDriver",
}
# Strategic-merge keys of the lists this project patches (k8s.io/api patchMergeKey tags).
MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "env": "name",
    "volumes": "name", "volumeMounts": "mountPath", "ports": "containerPort", "imagePullSecrets": "name",
}
# Kustomize's "legacy" output order (api/resid/gvk.go orderFirst / orderLast); other kinds sort between.
ORDER_FIRST = [
    "Namespace", "ResourceQuota", "StorageClass", "CustomResourceDefinition", "ServiceAccount", "PodSecurityPolicy",
    "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "ConfigMap", "Secret", "Endpoints", "Service",
    "LimitRange", "PriorityClass", "PersistentVolume", "PersistentVolumeClaim", "Deployment", "StatefulSet",
    "CronJob", "PodDisruptionBudget",
]
ORDER_LAST = ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]


class RenderError(Exception):
    pass


# ---- Loading ----

def kustomization_file(directory: Path) -> Path:
    for name in KUSTOMIZATION_FILES:
        if (directory / name).is_file():
            return directory / name
    raise RenderError(f"{directory}: no kustomization.yaml")


def load_documents(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        docs = [d for d in yaml.safe_load_all(fh) if d]
    for d in docs:
        if not isinstance(d, dict) or "kind" not in d or "metadata" not in d:
            raise RenderError(f"{path}: not a Kubernetes object: {str(d)[:80]}")
    return docs


def group_of(obj: dict[str, Any]) -> str:
    api = obj.get("apiVersion", "")
    return api.split("/", 1)[0] if "/" in api else ""


def key_of(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = obj["metadata"]
    return (group_of(obj), obj["kind"], meta.get("namespace", ""), meta["name"])


# ---- Strategic merge ----

def merge(target: Any, patch: Any, field: str = "") -> Any:
    """Strategic merge of `patch` into `target` (both plain YAML data); returns the result."""
    if isinstance(patch, dict):
        directive = patch.get("$patch")
        if directive == "replace":
            return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
        if not isinstance(target, dict):
            return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
        out = dict(target)
        for k, v in patch.items():
            if k == "$patch":
                continue
            if v is None:
                out.pop(k, None)  # null deletes the field
            elif k in out:
                out[k] = merge(out[k], v, k)
            else:
                out[k] = merge(None, v, k) if isinstance(v, dict | list) else copy.deepcopy(v)
        return out
    if isinstance(patch, list):
        key = MERGE_KEYS.get(field)
        if key is None or not isinstance(target, list):
            return [_strip(copy.deepcopy(v)) for v in patch if not _is_delete(v)]
        out = [copy.deepcopy(v) for v in target]
        for item in patch:
            if not isinstance(item, dict) or key not in item:
                raise RenderError(f"patch list `{field}` item lacks its merge key `{key}`: {item}")
            index = next((i for i, cur in enumerate(out) if isinstance(cur, dict) and cur.get(key) == item[key]), None)
            if _is_delete(item):
                if index is not None:
                    out.pop(index)
            elif index is None:
                out.insert(0, merge(None, item, field))  # Kustomize puts new items first
            else:
                out[index] = merge(out[index], item, field)
        return out
    return copy.deepcopy(patch)


def _is_delete(item: Any) -> bool:
    return isinstance(item, dict) and item.get("$patch") == "delete"


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "$patch"}
    return value


# ---- Transformers ----

def apply_patches(objects: list[dict[str, Any]], patches: list[dict[str, Any]], where: Path) -> list[dict[str, Any]]:
    for patch in patches:
        g, kind, ns, name = key_of(patch)
        hits = [
            i for i, o in enumerate(objects)
            if o["kind"] == kind and group_of(o) == g and o["metadata"]["name"] == name
            and (not ns or o["metadata"].get("namespace", "") == ns)
        ]
        if len(hits) != 1:
            raise RenderError(f"{where}: patch {kind}/{name} matches {len(hits)} objects (needs exactly one)")
        if patch.get("$patch") == "delete":
            objects.pop(hits[0])
        else:
            objects[hits[0]] = merge(objects[hits[0]], patch)
    return objects


def apply_namespace(objects: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    moved = {
        (o["metadata"]["name"], o["metadata"].get("namespace", "")): namespace
        for o in objects if o["kind"] == "ServiceAccount"
    }
    for o in objects:
        if o["kind"] not in CLUSTER_SCOPED:
            o["metadata"]["namespace"] = namespace
        if o["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            for subject in o.get("subjects") or []:
                ident = (subject.get("name", ""), subject.get("namespace", ""))
                if subject.get("kind") == "ServiceAccount" and ident in moved:
                    subject["namespace"] = moved[ident]
    return objects


IMAGE = re.compile(r"^(?P<name>[^@]+?)(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>.+))?$")


def rewrite_image(image: str, rules: list[dict[str, Any]]) -> str:
    m = IMAGE.match(image)
    if not m:
        return image
    name, tag, digest = m.group("name"), m.group("tag"), m.group("digest")
    for rule in rules:
        if rule.get("name") != name:
            continue
        name = rule.get("newName", name)
        if rule.get("digest"):
            return f"{name}@{rule['digest']}"
        if rule.get("newTag") is not None:
            return f"{name}:{rule['newTag']}"
        return f"{name}{':' + tag if tag else ''}{'@' + digest if digest else ''}"
    return image


def pod_specs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj.get("spec") or {}
    if obj["kind"] == "Pod":
        return [spec]
    if obj["kind"] == "CronJob":
        return [((spec.get("jobTemplate") or {}).get("spec") or {}).get("template", {}).get("spec") or {}]
    template = spec.get("template")
    return [template.get("spec") or {}] if isinstance(template, dict) else []


def apply_images(objects: list[dict[str, Any]], rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for o in objects:
        for pod in pod_specs(o):
            for field in ("initContainers", "containers"):
                for c in pod.get(field) or []:
                    if "image" in c:
                        c["image"] = rewrite_image(str(c["image"]), rules)
    return objects


# ---- Rendering ----

def render_dir(directory: Path) -> list[dict[str, Any]]:
    directory = directory.resolve()
    path = kustomization_file(directory)
    spec = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    unknown = set(spec) - SUPPORTED
    if unknown:
        raise RenderError(f"{path}: fields outside the supported Kustomize subset: {sorted(unknown)}")
    objects: list[dict[str, Any]] = []
    for entry in [*(spec.get("bases") or []), *(spec.get("resources") or [])]:
        target = (directory / entry).resolve()
        if target.is_dir():
            objects.extend(render_dir(target))
        elif target.is_file():
            objects.extend(load_documents(target))
        else:
            raise RenderError(f"{path}: resource {entry} does not exist")
    seen: set[tuple[str, str, str, str]] = set()
    for o in objects:
        k = key_of(o)
        if k in seen:
            raise RenderError(f"{path}: {k[1]}/{k[3]} is defined twice")
        seen.add(k)
    patches = [d for p in spec.get("patchesStrategicMerge") or [] for d in load_documents(directory / p)]
    objects = apply_patches(objects, patches, path)
    if spec.get("namespace"):
        objects = apply_namespace(objects, spec["namespace"])
    if spec.get("images"):
        objects = apply_images(objects, spec["images"])
    return objects


def order(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def rank(o: dict[str, Any]) -> tuple:
        kind = o["kind"]
        if kind in ORDER_FIRST:
            r = ORDER_FIRST.index(kind)
        elif kind in ORDER_LAST:
            r = 1000 + ORDER_LAST.index(kind)
        else:
            r = 500
        api = o.get("apiVersion", "")
        group, _, version = api.rpartition("/")
        gvk = f"{group or '~G'}_{version}_{kind}"  # Kustomize's ResId order within a rank
        return (r, gvk, o["metadata"].get("namespace", ""), o["metadata"]["name"])

    return sorted(objects, key=rank)


def render(directory: Path | str) -> list[dict[str, Any]]:
    """The objects a kustomization directory renders to, in Kustomize's legacy order."""
    return order(render_dir(Path(directory)))


def to_yaml(objects: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(objects, sort_keys=False, width=120, default_flow_style=False)


def overlays() -> list[Path]:
    return sorted(p for p in OVERLAYS.iterdir() if p.is_dir() and any((p / n).is_file() for n in KUSTOMIZATION_FILES))


def set_tag(directory: Path, tag: str) -> None:
    """Set the overlay's image tag and rename its migration Job after it (Job specs are immutable)."""
    if not re.fullmatch(r"[\w][\w.-]{0,127}", tag):
        raise RenderError(f"not an image tag: {tag!r}")
    path = kustomization_file(directory)
    text = path.read_text(encoding="utf-8")
    new, n = re.subn(r'(\n\s*newTag:\s*)"?[^"\n]*"?', rf'\g<1>"{tag}"', text)
    if n != 1:
        raise RenderError(f"{path}: expected one newTag, found {n}")
    path.write_text(new, encoding="utf-8")
    job = directory / "migrate-job.yaml"
    if job.is_file():
        text = job.read_text(encoding="utf-8")
        new, n = re.subn(r"(\n  name: gpufinops-migrate-)[\w-]+", rf"\g<1>{job_suffix(tag)}", text)
        if n != 1:
            raise RenderError(f"{job}: expected one Job name gpufinops-migrate-*, found {n}")
        job.write_text(new, encoding="utf-8")


def job_suffix(tag: str) -> str:
    """An image tag as a DNS-label suffix: `0.1.0` -> `0-1-0`."""
    return re.sub(r"[^a-z0-9-]+", "-", tag.lower()).strip("-")[:40]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", nargs="?", help="a kustomization directory (an overlay)")
    parser.add_argument("--all", action="store_true", help="every overlay under deploy/k8s/overlays")
    parser.add_argument("--out", help="with --all: the directory to write <overlay>.yaml files into")
    parser.add_argument("--set-tag", metavar="TAG", help="set the overlay's image tag and migration Job name")
    args = parser.parse_args(argv)
    try:
        if args.set_tag:
            if not args.directory:
                parser.error("--set-tag needs an overlay directory")
            set_tag(Path(args.directory), args.set_tag)
            return 0
        if args.all:
            out = Path(args.out) if args.out else None
            if out:
                out.mkdir(parents=True, exist_ok=True)
            for overlay in overlays():
                objects = render(overlay)
                if out:
                    (out / f"{overlay.name}.yaml").write_text(to_yaml(objects), encoding="utf-8")
                print(f"{overlay.relative_to(DEPLOY.parent)}: {len(objects)} objects "
                      f"({', '.join(sorted({o['kind'] for o in objects}))})")
            return 0
        if not args.directory:
            parser.error("give an overlay directory or --all")
        sys.stdout.write(to_yaml(render(args.directory)))
        return 0
    except RenderError as exc:
        print(f"render: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
