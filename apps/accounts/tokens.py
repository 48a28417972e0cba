"""Token format and hashing, shared by the service that issues tokens and the authentication that checks them."""

from __future__ import annotations

import hashlib
import secrets

TOKEN_PREFIX = "gfo_"
PREFIX_LENGTH = 12  # characters of the token kept in clear, to tell tokens apart in the admin


def new_token() -> str:
    """A fresh random token: `gfo_` plus 43 URL-safe characters (256 bits)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    """SHA-256 hex digest of a token; the only form in which a token is stored."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
