"""Serializers shared by every API: the documented error shapes."""

from __future__ import annotations

from rest_framework import serializers


class ErrorSerializer(serializers.Serializer):
    """400: the bad parameters, each with its messages."""

    # DRF's SerializerMetaclass pops declared fields off the class, so this does not shadow Serializer.errors;
    # the stubs cannot see that.
    errors = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()))


class DetailSerializer(serializers.Serializer):
    """401, 404, 429: DRF's own shape."""

    detail = serializers.CharField()


def MoneyField(**kwargs) -> serializers.DecimalField:  # noqa: N802 (a field factory, read like a field class)
    """USD, exact to the micro-dollar (the ledger's precision), as a JSON number."""
    return serializers.DecimalField(max_digits=20, decimal_places=6, coerce_to_string=False, **kwargs)
