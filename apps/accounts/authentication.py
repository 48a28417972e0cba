"""Token authentication against hashed ApiToken rows (`Authorization: Token <token>`).

Only the SHA-256 digest of a token is stored, so a database dump does not hand out API access.
A missing, unknown, expired or inactive-user token is a 401 with `WWW-Authenticate: Token`. The same query reads
what the user may see (`apps.accounts.selectors.remember_visibility`), so an API request pays one round trip for
authentication and visibility together.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from apps.accounts.models import ApiToken
from apps.accounts.selectors import remember_visibility, token_by_digest
from apps.accounts.tokens import token_digest

# last_used_at is refreshed at most this often, so reads do not turn into a write per request.
LAST_USED_RESOLUTION = timedelta(minutes=5)


class HashedTokenAuthentication(TokenAuthentication):
    """DRF's `Token` scheme (so drf-spectacular documents it), checked against ApiToken digests."""

    keyword = "Token"

    def authenticate_credentials(self, key):
        """Finds the token by digest and refuses expired tokens and inactive users."""
        # One round trip: the token, its user, and what the user may see (finance group, one row per team).
        found = token_by_digest(token_digest(key))
        if found is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        token = found.token
        now = timezone.now()
        if token.expires_at is not None and token.expires_at <= now:
            raise exceptions.AuthenticationFailed("Token has expired.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        remember_visibility(token.user, finance=found.in_finance, teams=found.teams)
        return token.user, token
