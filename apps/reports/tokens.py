"""Signed unsubscribe links: the token names one subscription and is signed with SECRET_KEY (django.core.signing),
so nobody can make one for another subscription. It does not expire: an old report's link still works. It carries no
timestamp, so the archive re-renders a sent e-mail byte for byte (tokens made with a timestamp before still read)."""

from __future__ import annotations

from django.conf import settings
from django.core import signing

SALT = "gpufinops.reports.unsubscribe"


def make_token(subscription_id: int) -> str:
    return signing.Signer(salt=SALT).sign_object({"s": subscription_id})


def read_token(token: str) -> int | None:
    """The subscription id of a valid token, else None."""
    try:
        # Two colons: the timestamped form that links sent before carry; one: the plain form.
        timestamped = token.count(":") == 2
        data = signing.loads(token, salt=SALT) if timestamped else signing.Signer(salt=SALT).unsign_object(token)
    except (signing.BadSignature, ValueError):
        return None
    value = data.get("s") if isinstance(data, dict) else None
    return value if isinstance(value, int) else None


def unsubscribe_url(subscription) -> str:
    return f"{settings.GPUFINOPS_BASE_URL.rstrip('/')}/reports/unsubscribe/{make_token(subscription.pk)}/"
