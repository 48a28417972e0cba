"""Token authentication against hashed ApiToken rows (filled in by the API work)."""

from __future__ import annotations

from rest_framework.authentication import TokenAuthentication


class HashedTokenAuthentication(TokenAuthentication):
    pass
