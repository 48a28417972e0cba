"""Token authentication against hashed ApiToken rows (`Authorization: Token <token>`).

Only the SHA-256 digest of a token is stored, so a database dump does not hand out API access.
A missing, unknown, expired or inactive-user token is a 401 with `WWW-Authenticate: Token`. The same query reads
what the user may see (`apps.accounts.selectors.remember_visibility`), so an API request pays one round trip for
authentication and visibility together.
"""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import Group
from django.db.models import Exists, F, OuterRef
from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from apps.accounts.models import ApiToken
from apps.accounts.selectors import FINANCE_GROUP, remember_visibility
from apps.accounts.tokens import token_digest

# last_used_at is refreshed at most this often, so reads do not turn into a write per request.
LAST_USED_RESOLUTION = timedelta(minutes=5)


# Tokens with their user and what the user may see (finance group, one row per team): built once, filtered by digest
# per request (building the subquery and annotations was a fifth of an authentication's CPU). Lazy: no query until
# filtered and read; never read itself (its result cache would be shared).
_TOKENS_WITH_VISIBILITY = ApiToken.objects.select_related("user").annotate(
    in_finance=Exists(Group.objects.filter(name=FINANCE_GROUP, user=OuterRef("user_id"))),
    team_name=F("user__teams__name"))


class HashedTokenAuthentication(TokenAuthentication):
    """DRF's `Token` scheme (so drf-spectacular documents it), checked against ApiToken digests."""

    keyword = "Token"

    def authenticate_credentials(self, key):
        """Finds the token by digest and refuses expired tokens and inactive users."""
        # One round trip: the token, its user, and what the user may see (finance group, one row per team).
        rows = list(_TOKENS_WITH_VISIBILITY.filter(digest=token_digest(key)))
        if not rows:
            raise exceptions.AuthenticationFailed("Invalid token.")
        token = rows[0]
        now = timezone.now()
        if token.expires_at is not None and token.expires_at <= now:
            raise exceptions.AuthenticationFailed("Token has expired.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        remember_visibility(token.user, finance=token.in_finance,
                            teams={r.team_name for r in rows if r.team_name is not None})
        return token.user, token
