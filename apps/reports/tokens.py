"""Signed unsubscribe links: the token names one subscription and is signed with SECRET_KEY (django.core.signing),
so nobody can make one for another subscription. It does not expire: an old report's link still works."""

from __future__ import annotations

from django.conf import settings
from django.core import signing

SALT = "gpufinops.reports.unsubscribe"


def make_token(subscription_id: int) -> str:
    return signing.dumps({"s": subscription_id}, salt=SALT, compress=False)


def read_token(token: str) -> int | None:
    """The subscription id of a valid token, else None."""
    try:
        data = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        return None
    value = data.get("s") if isinstance(data, dict) else None
    return value if isinstance(value, int) else None


def unsubscribe_url(subscription) -> str:
    return f"{settings.GPUFINOPS_BASE_URL.rstrip('/')}/reports/unsubscribe/{make_token(subscription.pk)}/"
