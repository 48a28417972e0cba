"""Serializers shared by every API: the documented error shapes."""

from __future__ import annotations

from rest_framework import serializers


class ErrorSerializer(serializers.Serializer):
    """400: the bad parameters, each with its messages."""

    errors = serializers.DictField(child=serializers.ListField(child=serializers.CharField()))


class DetailSerializer(serializers.Serializer):
    """401, 404, 429: DRF's own shape."""

    detail = serializers.CharField()
