"""Output shape of `/api/v1/reconciliation/` (docs/billing.md, "Reconciliation")."""

from __future__ import annotations

from rest_framework import serializers

from apps.common.serializers import MoneyField


class NodeReconciliationSerializer(serializers.Serializer):
    node = serializers.CharField()
    node_group = serializers.CharField()
    gpu_model = serializers.CharField()
    capacity_gpu_hours = serializers.FloatField()
    price_card_cost = MoneyField(help_text="capacity GPU-hours x the price card, USD")
    unpriced_gpu_hours = serializers.FloatField(help_text="capacity hours without a price: not in price_card_cost")
    billed_cost = MoneyField(allow_null=True, help_text="the bill's cost of the node in the month; null: no bill line")
    variance = MoneyField(allow_null=True, help_text="billed_cost - price_card_cost")


class ClusterReconciliationSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    price_card_cost = MoneyField()
    billed_cost = MoneyField()
    variance = MoneyField(help_text="billed_cost - price_card_cost")
    variance_share = serializers.FloatField(allow_null=True, help_text="variance / price_card_cost")
    unpriced_gpu_hours = serializers.FloatField()
    nodes_without_bill = serializers.ListField(child=serializers.CharField(),
                                               help_text="GPU nodes in the ledger with no bill line in the month")
    nodes = NodeReconciliationSerializer(many=True)


class UnmatchedLineSerializer(serializers.Serializer):
    bill = serializers.CharField(help_text="the imported file")
    row = serializers.IntegerField(help_text="its 1-based data row")
    provider = serializers.CharField()
    resource_id = serializers.CharField()
    resource_name = serializers.CharField()
    description = serializers.CharField()
    charge_period_start = serializers.DateTimeField()
    charge_period_end = serializers.DateTimeField()
    cost = MoneyField(help_text="in the cost basis")
    cluster = serializers.CharField(allow_null=True, help_text="the cluster its tags name, if one")
    note = serializers.CharField(help_text="why it matched no node")


class ImportSerializer(serializers.Serializer):
    name = serializers.CharField()
    focus_version = serializers.CharField()
    imported_at = serializers.DateTimeField()


class ReconciliationSerializer(serializers.Serializer):
    month = serializers.CharField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    basis = serializers.ChoiceField(choices=["EffectiveCost", "BilledCost"],
                                    help_text="the bill's cost column (GPUFINOPS_BILL_COST)")
    bill_lines = serializers.IntegerField(help_text="GPU node lines charged in the month; 0: no bill imported for it")
    clusters = ClusterReconciliationSerializer(many=True)
    unmatched_lines = UnmatchedLineSerializer(many=True)
    unmatched_cost = MoneyField()
    imports = ImportSerializer(many=True)


class BilledTeamSerializer(serializers.Serializer):
    team = serializers.CharField()
    cost = MoneyField(help_text="the team's share of its nodes' bill, USD, in the cost basis")
    billed_gpu_hours = serializers.FloatField(help_text="allocated GPU-hours on node-hours the bill covers")
    unbilled_gpu_hours = serializers.FloatField(help_text="allocated GPU-hours on node-hours without a bill line")


class BilledCostsSerializer(serializers.Serializer):
    basis = serializers.ChoiceField(choices=["EffectiveCost", "BilledCost"])
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    bill_lines = serializers.IntegerField(help_text="bill lines in the range; 0: no bill covers it")
    teams = BilledTeamSerializer(many=True)
    teams_cost = MoneyField()
    unallocated_cost = MoneyField(allow_null=True, help_text="the bill's share no pod held; finance and staff only")
    total_cost = MoneyField()
    unbilled_gpu_hours = serializers.FloatField()
