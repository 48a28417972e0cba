"""Which node a bill line is for: the per-provider rule joining FOCUS `ResourceId` to a node's `spec.providerID`.

Pure (strings in, keys out). No FOCUS column carries a providerID, so both sides are reduced to one key per cloud
(docs/billing.md "Matching"; OpenCost `ParseID` and its Azure billing parser do the same):

* AWS: providerID `aws:///us-east-2a/i-0fea…`; ResourceId `i-0fea…` or an ARN `…:instance/i-0fea…`. Key: the
  instance id.
* Google Cloud: providerID `gce://project/zone/name`; ResourceId `//compute.googleapis.com/…/instances/name`, or
  `ResourceName` = name. Key: the instance name.
* Azure: providerID `azure:///subscriptions/…/virtualMachineScaleSets/S/virtualMachines/3`; ResourceId the scale
  set's ARM id, `ResourceName` `S_3` naming the instance. Key: the lowercased ARM id of the VM; without an instance
  name, the scale set's, shared by its nodes.
* Oracle: providerID `oci://ocid1.instance…` or the bare OCID; ResourceId the OCID. Key: the OCID.

Where the bill has no resource id (aggregated rows), the node-group tags the clouds put on their machines name the
node pool, matched to the node label each cloud sets (`POOL_TAGS`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

AWS, GCP, AZURE, OCI = "aws", "gcp", "azure", "oci"
# ProviderName / ServiceProviderName as the clouds write it, lowercased, -> the rule to apply.
PROVIDER_NAMES = {
    "aws": AWS, "amazon web services": AWS, "amazon web services, inc.": AWS,
    "google cloud": GCP, "google": GCP, "google cloud platform": GCP, "gcp": GCP,
    "microsoft": AZURE, "azure": AZURE, "microsoft azure": AZURE,
    "oracle": OCI, "oci": OCI, "oracle cloud infrastructure": OCI,
}
_AZURE_VM_NAME = re.compile(r"^(?P<vmss>.+)_(?P<instance>\d+)$")
# An Oracle instance OCID: `ocid1.instance.<realm>.<region>.<id>` (the version digit is kept general).
_OCI_INSTANCE = re.compile(r"^ocid\d+\.instance\.")


@dataclass(frozen=True)
class LineKey:
    """What a bill line names: one node (`kind` "node") or every node of an Azure scale set ("scale_set")."""

    kind: str
    key: str


@dataclass(frozen=True)
class PoolTag:
    """A node pool named by a cloud's tags on an aggregated line: the pool, the cluster if tagged, and the node
    labels that carry the pool's name on a node."""

    pool: str
    cluster: str
    labels: tuple[str, ...]


# (tag naming the pool, tag naming the cluster, node labels carrying the pool name), per cloud's managed node groups.
POOL_TAGS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("eks:nodegroup-name", "eks:cluster-name", ("eks.amazonaws.com/nodegroup",)),
    ("karpenter.sh/nodepool", "eks:cluster-name", ("karpenter.sh/nodepool",)),
    ("goog-k8s-node-pool-name", "goog-k8s-cluster-name", ("cloud.google.com/gke-nodepool",)),
    ("aks-managed-poolName", "aks-managed-cluster-name", ("kubernetes.azure.com/agentpool", "agentpool")),
)


def provider_rule(provider_name: str, resource_id: str = "") -> str:
    """The matching rule for a line: by its provider's name, else by the shape of its resource id ("" if none)."""
    rule = PROVIDER_NAMES.get(provider_name.strip().lower(), "")
    if rule:
        return rule
    rid = resource_id.strip().lower()
    if rid.startswith(("i-", "arn:aws:")):
        return AWS
    if rid.startswith("/subscriptions/"):
        return AZURE
    if rid.startswith("oci://") or _OCI_INSTANCE.match(rid):
        return OCI
    if rid.startswith("//compute.googleapis.com/"):
        return GCP
    return ""


def node_keys(provider_id: str) -> tuple[str, ...]:
    """The keys a node answers to: its machine's key, and for an Azure scale-set instance also its scale set's."""
    pid = provider_id.strip()
    if pid.startswith("aws://"):
        last = pid.rstrip("/").rsplit("/", 1)[-1]
        return (f"{AWS}:{last}",) if last.startswith("i-") else ()
    if pid.startswith("gce://"):
        last = pid.rstrip("/").rsplit("/", 1)[-1]
        return (f"{GCP}:{last}",) if last else ()
    if pid.startswith("azure://"):
        arm = "/" + pid[len("azure://"):].strip("/").lower()
        if "/virtualmachinescalesets/" in arm and "/virtualmachines/" in arm:
            return (f"{AZURE}:{arm}", f"{AZURE}-vmss:{arm.split('/virtualmachines/', 1)[0]}")
        return (f"{AZURE}:{arm}",)
    if pid.startswith("oci://"):
        return (f"{OCI}:{pid[len('oci://'):]}",)
    if _OCI_INSTANCE.match(pid):
        return (f"{OCI}:{pid}",)
    return ()


def line_key(rule: str, resource_id: str, resource_name: str = "") -> LineKey | None:
    """The key of a bill line's resource under `rule`, or None when it names no machine this rule knows."""
    rid, name = resource_id.strip(), resource_name.strip()
    if not rid:
        return None
    if rule == AWS:
        last = rid.rsplit("/", 1)[-1]
        return LineKey("node", f"{AWS}:{last}") if last.startswith("i-") else None
    if rule == GCP:
        if "/instances/" in rid:
            return LineKey("node", f"{GCP}:{rid.rstrip('/').rsplit('/', 1)[-1]}")
        return LineKey("node", f"{GCP}:{name or rid.rstrip('/').rsplit('/', 1)[-1]}")
    if rule == AZURE:
        arm = "/" + rid.strip("/").lower()
        if "/virtualmachinescalesets/" not in arm:
            return LineKey("node", f"{AZURE}:{arm}") if "/virtualmachines/" in arm else None
        if "/virtualmachines/" in arm:
            return LineKey("node", f"{AZURE}:{arm}")
        # The scale set's row names its instance only through the VM name `<scale set>_<n>` (OpenCost's
        # AzureSetProviderID); without it the row is the scale set's, shared by its nodes.
        vm = _AZURE_VM_NAME.match(name.lower())
        if vm and arm.endswith("/" + vm["vmss"]):
            return LineKey("node", f"{AZURE}:{arm}/virtualmachines/{vm['instance']}")
        return LineKey("scale_set", f"{AZURE}-vmss:{arm}")
    if rule == OCI:
        ocid = rid[len("oci://"):] if rid.startswith("oci://") else rid
        return LineKey("node", f"{OCI}:{ocid}") if _OCI_INSTANCE.match(ocid) else None
    return None


def pool_tag(tags: Mapping[str, str]) -> PoolTag | None:
    """The node pool an aggregated line's tags name, if any (first of POOL_TAGS present)."""
    for pool_key, cluster_key, labels in POOL_TAGS:
        pool = (tags.get(pool_key) or "").strip()
        if pool:
            return PoolTag(pool=pool, cluster=(tags.get(cluster_key) or "").strip(), labels=labels)
    return None


def looks_like_gpu_machine(pattern: re.Pattern[str], *texts: str) -> bool:
    """Whether a line's machine type (in its description, SKU details or resource name) is a GPU one: how a GPU
    node's line matched to no node is told from the rest of the bill."""
    return any(pattern.search(t) for t in texts if t)
