"""A pod spec's containers as the GPU rules read them: one reading for pods (Kubernetes collector) and for the pod
templates of Kueue workloads (Kueue collector), so a sidecar or a bad quantity means the same in both."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from apps.inventory.gpus import is_nvidia_resource
from apps.inventory.observations import ContainerRequest

log = logging.getLogger(__name__)


def nvidia_resources(resources: Mapping[str, Any] | None) -> dict[str, str]:
    """The `nvidia.com/*` entries of a resource list, as strings."""
    return {k: str(v) for k, v in (resources or {}).items() if is_nvidia_resource(k)}


def parse_quantity(value: Any) -> float | None:
    """Extended resources are integers; reject anything else instead of guessing."""
    try:
        q = float(str(value))
    except (TypeError, ValueError):
        return None
    if q != q or q < 0 or q in (float("inf"),):
        return None
    return q


def container_resources(container: Mapping[str, Any]) -> dict[str, float]:
    """A container's NVIDIA requests: for extended resources requests equal limits, so limits are read when
    requests are absent. An unparsable quantity is logged and left out."""
    res = container.get("resources") or {}
    merged = {**nvidia_resources(res.get("limits")), **nvidia_resources(res.get("requests"))}
    out: dict[str, float] = {}
    for k, v in merged.items():
        q = parse_quantity(v)
        if q is None:
            log.warning("ignoring unparsable quantity %r for %s in container %s", v, k, container.get("name"))
            continue
        out[k] = q
    return out


def container_requests(spec: Mapping[str, Any]) -> list[ContainerRequest]:
    """App containers, then init containers. An init container with `restartPolicy: Always` is a sidecar: it runs
    beside the app containers, so the scheduler adds its request to theirs (gpus.effective_request)."""
    containers = [
        ContainerRequest(c.get("name") or "", "app", container_resources(c)) for c in spec.get("containers") or []
    ]
    for c in spec.get("initContainers") or []:
        kind = "sidecar" if c.get("restartPolicy") == "Always" else "init"
        containers.append(ContainerRequest(c.get("name") or "", kind, container_resources(c)))
    return containers
