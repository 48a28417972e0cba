"""The cloud bill (docs/billing.md): imported FOCUS files, the GPU nodes' lines kept from them, and each line spread
over the node-hours of its charge period.

* A **bill import** is one file, once: its SHA-256 is unique, so importing the same file again changes nothing.
  A later file for the same billing account and billing period replaces the earlier one's lines for that period
  (providers re-export month-to-date bills), so a bill is never counted twice.
* A **bill line** is one kept row: a usage charge matched to a GPU node (by resource id, or to a node pool by its
  tags), or a GPU machine's charge matched to no node (reported by the reconciliation).
* A **billed node-hour** is a line's share of one node in one hour, exact to the micro-dollar; a line's shares add
  up to its cost exactly.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.inventory.models import Cluster


def BillMoney(**kwargs) -> models.DecimalField:  # noqa: N802 (a field factory, read like a field class)
    """A cost as the bill writes it (FOCUS files carry up to 10-11 decimals): kept exactly."""
    return models.DecimalField(max_digits=24, decimal_places=10, **kwargs)


def Money(**kwargs) -> models.DecimalField:  # noqa: N802
    """USD to the micro-dollar, the ledger's precision (apps/usage/models.py)."""
    return models.DecimalField(max_digits=20, decimal_places=6, **kwargs)


class BillImport(models.Model):
    """One imported FOCUS file."""

    name = models.CharField(max_length=255)
    sha256 = models.CharField(max_length=64, unique=True)
    focus_version = models.CharField(max_length=8)
    rows_read = models.PositiveIntegerField(default=0)
    lines_kept = models.PositiveIntegerField(default=0)
    lines_matched = models.PositiveIntegerField(default=0)
    lines_replaced = models.PositiveIntegerField(default=0)  # lines of earlier imports this file superseded
    currency = models.CharField(max_length=8, blank=True)
    # What was not kept or not read, with row numbers (tenant-written tags that are not JSON, other currencies…).
    warnings = models.JSONField(default=list, blank=True)
    imported_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                    related_name="+")
    imported_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-imported_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.lines_kept} lines, {self.imported_at:%Y-%m-%d %H:%M})"


class BillLine(models.Model):
    """One GPU node's charge kept from a bill."""

    class Match(models.TextChoices):
        RESOURCE = "resource_id", "ResourceId = the node's providerID"
        SCALE_SET = "scale_set", "Azure scale set, shared by its nodes"
        NODE_POOL = "node_pool", "node-pool tags, shared by the pool's nodes"
        NONE = "none", "no node"

    bill = models.ForeignKey(BillImport, on_delete=models.CASCADE, related_name="lines")
    row = models.PositiveIntegerField()  # 1-based data row in the file
    provider = models.CharField(max_length=100)
    billing_account_id = models.CharField(max_length=300, blank=True)
    billing_period_start = models.DateTimeField(null=True, blank=True)
    charge_category = models.CharField(max_length=30)
    charge_period_start = models.DateTimeField()
    charge_period_end = models.DateTimeField()
    billed_cost = BillMoney()
    effective_cost = BillMoney()
    currency = models.CharField(max_length=8)
    resource_id = models.CharField(max_length=1000, blank=True)
    resource_name = models.CharField(max_length=500, blank=True)
    description = models.CharField(max_length=500, blank=True)
    pricing_quantity = models.DecimalField(max_digits=24, decimal_places=10, null=True, blank=True)
    pricing_unit = models.CharField(max_length=100, blank=True)
    tags = models.JSONField(default=dict, blank=True)
    match = models.CharField(max_length=12, choices=Match.choices)
    # The cluster the line was matched to (or whose name its tags carry); null when unknown.
    cluster = models.ForeignKey(Cluster, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    # Node names the line was matched to (one for resource_id, the scale set's or pool's nodes otherwise).
    nodes = models.JSONField(default=list, blank=True)
    note = models.CharField(max_length=300, blank=True)  # why it matched nothing, or how it was spread

    class Meta:
        ordering = ["charge_period_start", "bill", "row"]
        constraints = [models.UniqueConstraint(fields=["bill", "row"], name="uniq_billline")]
        indexes = [models.Index(fields=["charge_period_start", "charge_period_end"], name="billline_period")]

    def __str__(self) -> str:
        return f"row {self.row} {self.resource_id or self.resource_name} {self.effective_cost}"


class BilledNodeHour(models.Model):
    """A bill line's share of one node in one hour (node "" : the line's nodes were not in the ledger that hour)."""

    line = models.ForeignKey(BillLine, on_delete=models.CASCADE, related_name="hours")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, db_index=False, related_name="+")
    hour = models.DateTimeField()
    node = models.CharField(max_length=253, blank=True)
    node_group = models.CharField(max_length=253, blank=True)
    effective_cost = Money()
    billed_cost = Money()

    class Meta:
        ordering = ["cluster", "hour", "node"]
        constraints = [models.UniqueConstraint(fields=["line", "cluster", "hour", "node"], name="uniq_billednodehour")]
        indexes = [models.Index(fields=["cluster", "hour", "node"], name="billednodehour_node")]
