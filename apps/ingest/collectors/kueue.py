"""Kueue collector: ClusterQueues, LocalQueues and Workloads through `CustomObjectsApi`, as plain dataclasses.

`kueue.x-k8s.io/v1beta2` is read first; on 404 `v1beta1` (Kueue < 0.15) with its field names
(`spec.cohort`, LocalQueue `status.flavorUsage`). When neither version is served the cluster has
no Kueue: `read_kueue` returns None and nothing is an error.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime
from decimal import InvalidOperation
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.utils import parse_quantity

from apps.ingest.collectors.limits import PAGE_SIZE, request_timeout
from apps.ingest.collectors.podspec import container_requests
from apps.inventory.gpus import device_request
from apps.inventory.observations import (
    ClusterQueueInfo,
    Condition,
    KueueObjects,
    LocalQueueInfo,
    PodSetInfo,
    Quota,
    WorkloadInfo,
)

log = logging.getLogger(__name__)

GROUP = "kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")


class KueueError(Exception):
    """Kueue is installed but could not be read (5xx, timeout, forbidden)."""


# ---- Parsing (pure; version-aware) ----


def quantity(value: Any) -> float:
    """A Kubernetes quantity ("36Gi", "500m", 8) as a float; junk counts as 0 and is logged."""
    if value is None:
        return 0.0
    try:
        return float(parse_quantity(value))
    except (ValueError, InvalidOperation, TypeError):
        log.warning("ignoring unparsable Kueue quantity %r", value)
        return 0.0


def _optional_quantity(value: Any) -> float | None:
    return None if value is None else quantity(value)


def _status_totals(entries: list[dict] | None) -> dict[tuple[str, str], tuple[float, float]]:
    """flavorsReservation / flavorsUsage → {(flavor, resource): (total, borrowed)}."""
    out: dict[tuple[str, str], tuple[float, float]] = {}
    for flavor in entries or []:
        for res in flavor.get("resources") or []:
            out[(flavor.get("name", ""), res.get("name", ""))] = (
                quantity(res.get("total")),
                quantity(res.get("borrowed")),
            )
    return out


def parse_cluster_queue(obj: dict, version: str) -> ClusterQueueInfo:
    """A ClusterQueue dict; `spec.cohortName` in v1beta2, `spec.cohort` in v1beta1."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    cohort = spec.get("cohortName") if version == "v1beta2" else spec.get("cohort")
    cohort = cohort or spec.get("cohort") or spec.get("cohortName") or ""
    reserved = _status_totals(status.get("flavorsReservation"))
    used = _status_totals(status.get("flavorsUsage"))
    quotas: dict[tuple[str, str], Quota] = {}
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                key = (flavor.get("name", ""), res.get("name", ""))
                quotas[key] = Quota(
                    flavor=key[0],
                    resource=key[1],
                    nominal_quota=quantity(res.get("nominalQuota")),
                    borrowing_limit=_optional_quantity(res.get("borrowingLimit")),
                    lending_limit=_optional_quantity(res.get("lendingLimit")),
                )
    for key in sorted(set(reserved) | set(used)):
        base = quotas.get(key) or Quota(flavor=key[0], resource=key[1])
        r_total, r_borrowed = reserved.get(key, (0.0, 0.0))
        u_total, u_borrowed = used.get(key, (0.0, 0.0))
        # Borrowed quota is what the reservation holds above nominal; usage's figure when not reserved.
        quotas[key] = Quota(
            flavor=base.flavor,
            resource=base.resource,
            nominal_quota=base.nominal_quota,
            borrowing_limit=base.borrowing_limit,
            lending_limit=base.lending_limit,
            reserved=r_total,
            used=u_total,
            borrowed=r_borrowed if key in reserved else u_borrowed,
        )
    return ClusterQueueInfo(
        name=obj["metadata"]["name"],
        cohort=cohort,
        quotas=tuple(quotas[k] for k in sorted(quotas)),
        pending_workloads=int(status.get("pendingWorkloads") or 0),
        reserving_workloads=int(status.get("reservingWorkloads") or 0),
        admitted_workloads=int(status.get("admittedWorkloads") or 0),
    )


def parse_local_queue(obj: dict, version: str) -> LocalQueueInfo:
    """A LocalQueue dict (only counts and the target ClusterQueue are read: same in both versions)."""
    spec, status, meta = obj.get("spec") or {}, obj.get("status") or {}, obj["metadata"]
    return LocalQueueInfo(
        namespace=meta.get("namespace", ""),
        name=meta["name"],
        cluster_queue=spec.get("clusterQueue", ""),
        pending_workloads=int(status.get("pendingWorkloads") or 0),
        reserving_workloads=int(status.get("reservingWorkloads") or 0),
        admitted_workloads=int(status.get("admittedWorkloads") or 0),
    )


def parse_time(value: str | None) -> datetime | None:
    """An RFC 3339 timestamp as Kubernetes writes it ("2024-03-19T20:49:17Z")."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _pod_set(ps: dict) -> PodSetInfo:
    pod_spec = (ps.get("template") or {}).get("spec") or {}
    request = device_request(container_requests(pod_spec))
    return PodSetInfo(name=ps.get("name", ""), count=int(ps.get("count") or 1), request=request)


def parse_workload(obj: dict, version: str) -> WorkloadInfo:
    """A Workload dict; the fields read here are the same in v1beta1 and v1beta2."""
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    conditions = {
        c.get("type", ""): Condition(
            status=c.get("status", ""),
            reason=c.get("reason", ""),
            message=c.get("message", ""),
            last_transition=parse_time(c.get("lastTransitionTime")),
        )
        for c in status.get("conditions") or []
    }
    return WorkloadInfo(
        uid=meta.get("uid", "") or f"{meta.get('namespace', '')}/{meta['name']}",
        namespace=meta.get("namespace", ""),
        name=meta["name"],
        labels=dict(meta.get("labels") or {}),
        queue_name=spec.get("queueName", ""),
        cluster_queue=(status.get("admission") or {}).get("clusterQueue", ""),
        created=parse_time(meta.get("creationTimestamp")),
        pod_sets=tuple(_pod_set(ps) for ps in spec.get("podSets") or []),
        conditions=conditions,
    )


# ---- Reading from the API ----


def _pages(list_fn: Any, *args: Any) -> Iterator[dict]:
    token: str | None = None
    while True:
        page = list_fn(*args, limit=PAGE_SIZE, _continue=token, _request_timeout=request_timeout())
        yield from page.get("items") or []
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return


def served_version(api: client.CustomObjectsApi) -> str | None:
    """The first Kueue version that lists ClusterQueues; None when Kueue is not installed."""
    for version in VERSIONS:
        try:
            api.list_cluster_custom_object(GROUP, version, "clusterqueues", limit=1, _request_timeout=request_timeout())
        except ApiException as exc:
            if exc.status == 404:
                continue
            raise KueueError(f"Kueue {version}: HTTP {exc.status} {exc.reason}") from exc
        except Exception as exc:  # urllib3 errors, timeouts
            raise KueueError(f"Kueue {version}: {type(exc).__name__}: {str(exc)[:300]}") from exc
        return version
    return None


def read_kueue(api_client: client.ApiClient) -> KueueObjects | None:
    """Every ClusterQueue, LocalQueue and Workload, paginated; None when the cluster has no Kueue."""
    api = client.CustomObjectsApi(api_client)
    version = served_version(api)
    if version is None:
        return None
    try:
        cqs = [
            parse_cluster_queue(o, version)
            for o in _pages(api.list_cluster_custom_object, GROUP, version, "clusterqueues")
        ]
        lqs = [
            parse_local_queue(o, version)
            for o in _pages(api.list_custom_object_for_all_namespaces, GROUP, version, "localqueues")
        ]
        wls = [
            parse_workload(o, version)
            for o in _pages(api.list_custom_object_for_all_namespaces, GROUP, version, "workloads")
        ]
    except ApiException as exc:
        raise KueueError(f"Kueue {version}: HTTP {exc.status} {exc.reason}") from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise KueueError(f"Kueue {version}: unexpected object shape: {exc}") from exc
    except Exception as exc:  # urllib3 errors, timeouts
        raise KueueError(f"Kueue {version}: {type(exc).__name__}: {str(exc)[:300]}") from exc
    return KueueObjects(version, tuple(cqs), tuple(lqs), tuple(wls))
