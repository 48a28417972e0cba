"""Secrets at rest: cluster credentials are encrypted with a key from the environment (Fernet, AES-128-CBC +
HMAC-SHA256, from the `cryptography` package), never stored or shown in clear.

`GPUFINOPS_SECRETS_KEY` holds one or more comma-separated Fernet keys, the newest first: values are
encrypted with the first and decrypted with any, so a key is rotated by putting a new one in front and
running `manage.py rotate_secrets` (then dropping the old key). Without the setting a key is derived from
SECRET_KEY (development only; a system check warns when DEBUG is off).
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

PREFIX = "fernet:"  # marks a stored ciphertext (anything else in the column is treated as empty)


class SecretError(Exception):
    """A stored secret cannot be decrypted with the configured keys."""


def _keys() -> list[bytes]:
    raw = [k.strip() for k in (settings.GPUFINOPS_SECRETS_KEY or "").split(",") if k.strip()]
    if raw:
        return [k.encode() for k in raw]
    return [base64.urlsafe_b64encode(hashlib.sha256(("gpufinops-secrets:" + settings.SECRET_KEY).encode()).digest())]


def _fernet() -> MultiFernet:
    return MultiFernet([Fernet(k) for k in _keys()])


def using_derived_key() -> bool:
    return not (settings.GPUFINOPS_SECRETS_KEY or "").strip()


def encrypt(plain: str) -> str:
    """The stored form of `plain` ("" stays "")."""
    if not plain:
        return ""
    return PREFIX + _fernet().encrypt(plain.encode()).decode()


def decrypt(stored: str) -> str:
    """The clear value of a stored secret ("" for none)."""
    if not stored:
        return ""
    if not stored.startswith(PREFIX):
        raise SecretError("stored secret is not in the encrypted form")
    try:
        return _fernet().decrypt(stored[len(PREFIX):].encode()).decode()
    except InvalidToken as exc:
        raise SecretError("stored secret cannot be decrypted with GPUFINOPS_SECRETS_KEY (key changed?)") from exc


def rotate(stored: str) -> str:
    """Re-encrypt a stored secret with the newest key."""
    if not stored:
        return ""
    try:
        return PREFIX + _fernet().rotate(stored[len(PREFIX):].encode()).decode()
    except InvalidToken as exc:
        raise SecretError("stored secret cannot be decrypted with GPUFINOPS_SECRETS_KEY") from exc


def new_key() -> str:
    return Fernet.generate_key().decode()
