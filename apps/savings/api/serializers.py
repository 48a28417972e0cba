"""Output shape of `/api/v1/savings/` (docs/savings.md)."""

from __future__ import annotations

from rest_framework import serializers

from apps.common.serializers import MoneyField
from apps.savings.rules import Action


class SavingSerializer(serializers.Serializer):
    rank = serializers.IntegerField(help_text="1 = the most dollars per month")
    cluster = serializers.CharField()
    team = serializers.CharField()
    namespace = serializers.CharField(help_text="empty for a ClusterQueue")
    workload = serializers.CharField(help_text="`Kind/name` of the top controller, `Pod/name`, or `ClusterQueue/name`")
    action = serializers.ChoiceField(choices=list(Action.ALL))
    summary = serializers.CharField()
    period_cost = MoneyField(help_text="USD the action would have saved over the period (price card)")
    monthly = MoneyField(help_text="period_cost scaled to 30 days, USD")
    evidence = serializers.DictField(child=serializers.CharField(), help_text="the figures and hours it rests on")
    assumptions = serializers.ListField(child=serializers.CharField())
