"""DRA collector: `resource.k8s.io` ResourceSlices, ResourceClaims and DeviceClasses through the official client,
reduced by the DRA rules (`apps.inventory.gpus.dra`, `dra_claims`) into `observations.DraObjects`.

Which version to read is asked of discovery (`/apis`, which every authenticated user may read): the highest of
v1, v1beta2, v1beta1 the server serves, as NVIDIA's driver chart does. A cluster serving none has no DRA:
`read_dra` returns None after that one discovery request, with no failed request and nothing logged.
ResourceClaimTemplates are not read: the claims made from them carry all the ledger needs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from kubernetes import client

from apps.ingest.collectors.limits import request_timeout
from apps.inventory.gpus import dra, dra_claims
from apps.inventory.observations import ClaimInfo, DraObjects

GROUP = "resource.k8s.io"
VERSIONS = ("v1", "v1beta2", "v1beta1")  # highest first
# The client's API class of each version, by name: looked up when that version is served. Each class imports its
# typed models when first touched (pydantic classes built at import, ~0.07 CPU-s each): naming the three here made
# every process that imports the collector pay for all of them, DRA or not.
_APIS = {"v1": "ResourceV1Api", "v1beta2": "ResourceV1beta2Api", "v1beta1": "ResourceV1beta1Api"}

Paged = Callable[..., Any]  # kubernetes._paged: (list function) -> iterator of JSON items


def served_version(api_client: client.ApiClient) -> str:
    """The highest `resource.k8s.io` version discovery lists, or "" when the group is not served."""
    groups = client.ApisApi(api_client).get_api_versions(_request_timeout=request_timeout())
    for group in groups.groups or []:
        if group.name == GROUP:
            served = {v.version for v in group.versions or []}
            return next((v for v in VERSIONS if v in served), "")
    return ""


def _claim(item: dict[str, Any], inventory: dra.DraInventory, drivers: Collection[str], mig_by_memory: bool,
           warnings: list[str]) -> ClaimInfo:
    meta = item.get("metadata") or {}
    devices = dra_claims.claim_devices(item, inventory, drivers, mig_by_memory=mig_by_memory)
    warnings.extend(devices.warnings)
    return ClaimInfo(
        uid=str(meta.get("uid") or ""),
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        allocated=dra_claims.is_allocated(item),
        devices=devices.held,
        consumers=dra_claims.claim_consumers(item),
    )


def read_dra(
    api_client: client.ApiClient, paged: Paged, gpu_drivers: Collection[str], *, mig_by_memory: bool = False
) -> DraObjects | None:
    """The GPU drivers' devices and every ResourceClaim, in the highest served version; None without DRA.
    Raises what the client raises (ApiException, timeouts): the caller says what failed."""
    version = served_version(api_client)
    if not version:
        return None
    api = getattr(client, _APIS[version])(api_client)
    slices = list(paged(api.list_resource_slice))
    inventory = dra.read_slices(slices, gpu_drivers)
    warnings = list(inventory.warnings)
    claims = tuple(_claim(item, inventory, gpu_drivers, mig_by_memory, warnings)
                   for item in paged(api.list_resource_claim_for_all_namespaces))
    extended = frozenset(
        str(spec["extendedResourceName"])
        for spec in ((c.get("spec") or {}) for c in paged(api.list_device_class))
        if spec.get("extendedResourceName")
    )
    return DraObjects(version, inventory, claims, extended, tuple(warnings))
