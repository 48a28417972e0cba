"""Output shapes of the reports API (for the OpenAPI document; the views return plain data)."""

from __future__ import annotations

from rest_framework import serializers


class ReportTotalsSerializer(serializers.Serializer):
    cost = serializers.CharField(help_text="charged to the scope's teams, USD, exact (micro-dollar)")
    idle_cost = serializers.CharField()
    allocated_gpu_hours = serializers.FloatField()
    working_gpu_hours = serializers.FloatField()
    idle_gpu_hours = serializers.FloatField()
    unmeasured_gpu_hours = serializers.FloatField()
    unpriced_gpu_hours = serializers.FloatField()
    capacity_cost = serializers.CharField(required=False, help_text="all-teams editions only")
    unallocated_cost = serializers.CharField(required=False, help_text="all-teams editions only")
    printed = serializers.DictField(child=serializers.CharField(), help_text="as the e-mail prints them (cents)")


class EditionSerializer(serializers.Serializer):
    period = serializers.CharField(help_text="2026-W47 or 2026-11")
    kind = serializers.ChoiceField(choices=["weekly", "monthly"])
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    scope = serializers.CharField(help_text="all, or team-<a>+<b>")
    scope_teams = serializers.ListField(child=serializers.CharField(), allow_null=True)
    version = serializers.IntegerField(allow_null=True, help_text="null: not made yet (due)")
    status = serializers.ChoiceField(choices=["provisional", "final", "restated"])
    made = serializers.DateTimeField(allow_null=True)
    totals = ReportTotalsSerializer()
    csv_sha256 = serializers.CharField()
    focus_sha256 = serializers.CharField()
    files = serializers.DictField(child=serializers.CharField())


class DueSerializer(serializers.Serializer):
    period = serializers.CharField()
    kind = serializers.CharField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    status = serializers.CharField()
    version = serializers.IntegerField(allow_null=True)
    sent = serializers.BooleanField()
    coverage = serializers.FloatField(allow_null=True)
    waiting = serializers.CharField(allow_null=True)


class EditionListSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.CharField(allow_null=True)
    previous = serializers.CharField(allow_null=True)
    results = EditionSerializer(many=True)
    due = DueSerializer(many=True)


class EditionDetailSerializer(EditionSerializer):
    coverage = serializers.JSONField()
    headline = serializers.JSONField()
    rows = serializers.JSONField()
    total_row = serializers.JSONField()
    restatement = serializers.JSONField(allow_null=True)
    editions = EditionSerializer(many=True)
