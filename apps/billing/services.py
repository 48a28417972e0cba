"""Writes of the bill: import a FOCUS file whole or not at all, keep the GPU nodes' lines, spread them over node-hours.

The rules (docs/billing.md): a line is kept when it is a `Usage` charge in the ledger's currency and either names a
GPU node (ResourceId against providerID, `matching.py`), an Azure scale set of GPU nodes, a node pool of GPU nodes
by its tags (only where the line has no ResourceId), or a GPU machine type matched to no node (reported). Credits,
taxes, purchases and adjustments are the platform's, not a node's. Each kept, matched line is spread over the
node-hours of its charge period in proportion to the nodes' capacity GPU-hours in the ledger (a daily row goes to the
hours the node was there, never /24), or evenly over the period's hours when the ledger has none of them; its
shares add up to its cost exactly (to the micro-dollar).
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from apps.billing import matching
from apps.billing.focusfile import BillFile, BillRow, read_bill
from apps.billing.models import BilledNodeHour, BillImport, BillLine
from apps.common.timeutils import HOUR, ceil_hour, floor_hour, hours_between
from apps.inventory.models import Cluster, Node
from apps.usage.models import NodeHour
from apps.usage.money import MICRO, ZERO, apportion

USAGE = "Usage"


@dataclass(frozen=True)
class ImportResult:
    bill: BillImport
    created: bool  # False: this very file was imported before, and nothing changed


@dataclass(frozen=True)
class NodeRef:
    cluster_id: int
    node: str
    node_group: str


class NodeIndex:
    """Every known GPU node by the keys its providerID answers to, and by its node-pool labels."""

    def __init__(self, nodes: Iterable[Node]) -> None:
        self.by_key: dict[str, list[NodeRef]] = defaultdict(list)
        self.by_label: dict[tuple[str, str], list[NodeRef]] = defaultdict(list)
        for node in nodes:
            ref = NodeRef(node.cluster_id, node.name, node.node_group.name)
            for key in matching.node_keys(node.provider_id):
                self.by_key[key].append(ref)
            for label, value in (node.labels or {}).items():
                self.by_label[(label, value)].append(ref)

    @classmethod
    def load(cls) -> NodeIndex:
        return cls(Node.objects.select_related("node_group").order_by("cluster_id", "name"))


def import_bill(data: bytes, name: str, *, user: User | None = None) -> ImportResult:
    """Import one FOCUS file. Raises `BillFileError` (row and column named) and writes nothing when any value
    cannot be read; returns the earlier import, unchanged, for a file imported before."""
    digest = hashlib.sha256(data).hexdigest()
    earlier = BillImport.objects.filter(sha256=digest).first()
    if earlier is not None:
        return ImportResult(earlier, created=False)
    parsed = read_bill(data)
    try:
        with transaction.atomic():
            bill = _write(parsed, name=name[:255], digest=digest, user=user)
    except IntegrityError:  # the same file imported at the same moment by someone else: theirs stands
        return ImportResult(BillImport.objects.get(sha256=digest), created=False)
    return ImportResult(bill, created=True)


def _write(parsed: BillFile, *, name: str, digest: str, user: User | None) -> BillImport:
    currency = settings.GPUFINOPS_BILL_CURRENCY
    pattern = re.compile(settings.GPUFINOPS_BILL_GPU_MACHINES, re.IGNORECASE)
    index = NodeIndex.load()
    clusters = dict(Cluster.objects.values_list("name", "id"))
    warnings: list[str] = []
    lines: list[tuple[BillLine, list[NodeRef]]] = []
    for row in parsed.rows:
        line, refs = _decide(row, index, clusters, pattern)
        if line is None:
            continue
        if row.currency != currency:
            warnings.append(f"row {row.row}: a GPU node's charge in {row.currency[:8]}, not {currency}: not kept "
                            "(no conversion)")
            continue
        if row.tags_unreadable:
            warnings.append(f"row {row.row}: Tags is not a JSON object: not used for matching")
        lines.append((line, refs))
    bill = BillImport.objects.create(
        name=name, sha256=digest, focus_version=parsed.version, rows_read=len(parsed.rows),
        lines_kept=len(lines), lines_matched=sum(1 for _, refs in lines if refs), currency=currency,
        warnings=warnings[:200], imported_by=user if user is not None and user.pk else None,
    )
    bill.lines_replaced = _supersede(parsed.rows, bill)
    bill.save(update_fields=["lines_replaced"])
    for line, _ in lines:
        line.bill = bill
    BillLine.objects.bulk_create([line for line, _ in lines], batch_size=1000)
    _spread(lines)
    return bill


def _decide(row: BillRow, index: NodeIndex, clusters: dict[str, int],
            pattern: re.Pattern[str]) -> tuple[BillLine | None, list[NodeRef]]:
    """The line to keep for a row and the nodes it is for, or (None, []) when it is no GPU node's charge."""
    if row.charge_category != USAGE:
        return None, []
    rule = matching.provider_rule(row.provider, row.resource_id)
    key = matching.line_key(rule, row.resource_id, row.resource_name)
    refs: list[NodeRef] = []
    match, note = BillLine.Match.NONE, ""
    if key is not None and index.by_key.get(key.key):
        refs = index.by_key[key.key][:1] if key.kind == "node" else list(index.by_key[key.key])
        match = BillLine.Match.RESOURCE if key.kind == "node" else BillLine.Match.SCALE_SET
    elif not row.resource_id and not row.tags_unreadable:
        refs, note = _pool_nodes(row, index, clusters)
        if refs:
            match = BillLine.Match.NODE_POOL
    if not refs:
        gpu = matching.looks_like_gpu_machine(pattern, row.description, row.sku_details, row.resource_name)
        if not gpu and not note:
            return None, []
        note = note or ("no node has this providerID" if key is not None else
                        "no resource id and no node-pool tags" if not row.resource_id else
                        f"a resource id the {rule or 'unknown provider'} rule does not read")
    tagged = matching.pool_tag(row.tags)
    cluster_ids = {r.cluster_id for r in refs}
    cluster_id = next(iter(cluster_ids)) if len(cluster_ids) == 1 else (
        clusters.get(tagged.cluster) if tagged and not refs else None)
    line = BillLine(
        row=row.row, provider=row.provider[:100], billing_account_id=row.billing_account_id[:300],
        billing_period_start=row.billing_period_start, charge_category=row.charge_category[:30],
        charge_period_start=row.charge_period_start, charge_period_end=row.charge_period_end,
        billed_cost=row.billed_cost, effective_cost=row.effective_cost, currency=row.currency[:8],
        resource_id=row.resource_id[:1000], resource_name=row.resource_name[:500], description=row.description[:500],
        pricing_quantity=row.pricing_quantity, pricing_unit=row.pricing_unit[:100], tags=row.tags,
        match=match, cluster_id=cluster_id, nodes=sorted({r.node for r in refs}), note=note[:300],
    )
    return line, refs


def _pool_nodes(row: BillRow, index: NodeIndex, clusters: dict[str, int]) -> tuple[list[NodeRef], str]:
    """The nodes of the pool a line's tags name: within the tagged cluster when a cluster has that name; a pool
    name found in several clusters with no cluster to tell them apart matches nothing (never a guess)."""
    tag = matching.pool_tag(row.tags)
    if tag is None:
        return [], ""
    refs = [ref for label in tag.labels for ref in index.by_label.get((label, tag.pool), [])]
    if tag.cluster and tag.cluster in clusters:
        refs = [r for r in refs if r.cluster_id == clusters[tag.cluster]]
    if not refs:
        return [], f"no node of pool {tag.pool[:80]!r}"
    if len({r.cluster_id for r in refs}) > 1:
        return [], f"pool {tag.pool[:80]!r} is in several clusters and the tags name none of them"
    unique = {(r.cluster_id, r.node): r for r in refs}
    return [unique[k] for k in sorted(unique)], ""


def _supersede(rows: Sequence[BillRow], bill: BillImport) -> int:
    """Delete earlier imports' lines for the billing accounts and periods this file covers: it is the newer bill."""
    periods = {(r.provider[:100], r.billing_account_id[:300], r.billing_period_start) for r in rows
               if r.billing_account_id and r.billing_period_start is not None}
    replaced = 0
    for provider, account, start in periods:
        deleted, per_model = BillLine.objects.filter(
            provider=provider, billing_account_id=account, billing_period_start=start,
        ).exclude(bill=bill).delete()
        replaced += per_model.get(BillLine._meta.label, 0)
    return replaced


def _spread(lines: Sequence[tuple[BillLine, list[NodeRef]]]) -> None:
    matched = [(line, refs) for line, refs in lines if refs]
    if not matched:
        return
    weights = _ledger_weights(matched)
    rows: list[BilledNodeHour] = []
    for line, refs in matched:
        shares = [(hour, ref, w) for ref in refs for hour, w in weights.get((ref.cluster_id, ref.node), [])
                  if line.charge_period_start < hour + HOUR and hour < line.charge_period_end]
        if not shares:  # none of its nodes in the ledger then: evenly over the period's hours and nodes
            shares = [(hour, ref, 1.0) for hour in hours_between(line.charge_period_start, line.charge_period_end)
                      for ref in refs]
            line.note = (line.note + "; " if line.note else "") + "not in the ledger then: spread evenly"
            line.save(update_fields=["note"])
        rows.extend(_shares(line, shares))
    BilledNodeHour.objects.bulk_create(rows, batch_size=2000)



Weights = dict[tuple[int, str], list[tuple[datetime, float]]]


def _ledger_weights(matched: Sequence[tuple[BillLine, list[NodeRef]]]) -> Weights:
    """(cluster, node) -> [(hour, capacity GPU-hours)] from the ledger over the lines' charge periods."""
    start: datetime = floor_hour(min(line.charge_period_start for line, _ in matched))
    end: datetime = ceil_hour(max(line.charge_period_end for line, _ in matched))
    by_cluster: dict[int, set[str]] = defaultdict(set)
    for _, refs in matched:
        for ref in refs:
            by_cluster[ref.cluster_id].add(ref.node)
    out: Weights = defaultdict(list)
    for cluster_id, nodes in by_cluster.items():
        q = NodeHour.objects.filter(cluster_id=cluster_id, hour__gte=start, hour__lt=end, node__in=sorted(nodes))
        for node, hour, capacity in q.values_list("node", "hour", "capacity_gpu_hours").order_by("node", "hour"):
            out[(cluster_id, node)].append((hour, float(capacity)))
    return out


def _shares(line: BillLine, shares: list[tuple[datetime, NodeRef, float]]) -> list[BilledNodeHour]:
    weights = [Decimal(repr(w)) for _, _, w in shares]
    if sum(weights, ZERO) <= 0:
        weights = [Decimal(1)] * len(shares)
    total = sum(weights, ZERO)
    effective = apportion([line.effective_cost * w / total for w in weights], line.effective_cost, quantum=MICRO)
    billed = apportion([line.billed_cost * w / total for w in weights], line.billed_cost, quantum=MICRO)
    return [
        BilledNodeHour(line=line, cluster_id=ref.cluster_id, hour=hour, node=ref.node, node_group=ref.node_group,
                       effective_cost=e, billed_cost=b)
        for (hour, ref, _), e, b in zip(shares, effective, billed, strict=True)
    ]
