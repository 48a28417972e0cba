"""API tokens: stored hashed (SHA-256), with an expiry; the plain token is shown once."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """A bearer token for the REST API (`Authorization: Token <token>`)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    prefix = models.CharField(max_length=12, db_index=True)  # first characters, to tell tokens apart
    digest = models.CharField(max_length=64, unique=True)  # sha256 hex of the whole token
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.user} {self.prefix}…"
