"""Serializers shared by every API: the documented error shapes."""

from __future__ import annotations

from rest_framework import serializers


class ErrorSerializer(serializers.Serializer):
    """The one error envelope, for every status: a line saying what went wrong and, for bad input (400), the bad
    parameters each with its messages (empty otherwise)."""

    detail = serializers.CharField()
    # DRF's SerializerMetaclass pops declared fields off the class, so this does not shadow Serializer.errors;
    # the stubs cannot see that.
    errors = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()),
        help_text="the bad parameters, each with its messages; empty unless the status is 400")


# 401, 403, 404, 429: the same envelope (kept as a name for the endpoints that document them).
DetailSerializer = ErrorSerializer


def MoneyField(**kwargs) -> serializers.DecimalField:  # noqa: N802 (a field factory, read like a field class)
    """USD, exact to the micro-dollar (the ledger's precision), as a decimal string ("12.340000")."""
    return serializers.DecimalField(max_digits=20, decimal_places=6, coerce_to_string=True, **kwargs)
