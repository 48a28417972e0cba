"""Output shape of `/api/v1/budgets/` (docs/budgets.md)."""

from __future__ import annotations

from rest_framework import serializers

from apps.common.serializers import MoneyField


class ForecastSerializer(serializers.Serializer):
    actual = MoneyField(help_text="spent in the period so far (price card), USD")
    expected = MoneyField(help_text="forecast end-of-period spend, USD")
    low = MoneyField(help_text="low end of the range (the method's own past errors, docs/numbers.md)")
    high = MoneyField(help_text="high end of the range (the method's own past errors, docs/numbers.md)")
    run_rate_per_day = MoneyField(help_text="mean daily spend of the last 7 whole days")
    history_days = serializers.IntegerField(help_text="whole days of history the forecast rests on")


class BudgetStatusSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    team = serializers.CharField()
    cluster = serializers.CharField(allow_null=True, help_text="null: every cluster")
    namespace = serializers.CharField(allow_null=True, help_text="null: every namespace")
    period = serializers.ChoiceField(choices=["weekly", "monthly"])
    period_label = serializers.CharField(source="label", help_text="the current period: 2026-W48 or 2026-11")
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    amount = MoneyField()
    thresholds = serializers.ListField(child=serializers.IntegerField(), help_text="percent of the amount")
    actual = MoneyField()
    used_share = serializers.FloatField(allow_null=True, help_text="actual / amount")
    forecast = ForecastSerializer()
    forecast_share = serializers.FloatField(allow_null=True, help_text="forecast / amount")
    crossed_actual = serializers.ListField(child=serializers.IntegerField())
    crossed_forecast = serializers.ListField(child=serializers.IntegerField())
