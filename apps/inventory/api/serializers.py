"""Output shapes of the teams and clusters endpoints."""

from __future__ import annotations

from rest_framework import serializers


class TeamSerializer(serializers.Serializer):
    name = serializers.CharField()
    display_name = serializers.CharField()


class TeamDetailSerializer(TeamSerializer):
    namespaces = serializers.ListField(
        child=serializers.CharField(), help_text="namespaces explicitly mapped to this team"
    )
    clusters = serializers.ListField(child=serializers.CharField(), help_text="clusters where the team has hours")


class ClusterSerializer(serializers.Serializer):
    name = serializers.CharField()
    source = serializers.CharField(help_text="kubernetes or simulator")
    last_collected_hour = serializers.DateTimeField(allow_null=True, help_text="newest successfully collected bucket")


class ClusterDetailSerializer(ClusterSerializer):
    node_groups = serializers.ListField(child=serializers.CharField())
