"""Sign-in configuration checks: company sign-in needs its client, and somebody must be able to sign in."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register


@register(Tags.security)
def signin_configured(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    problems: list[CheckMessage] = []
    if settings.GPUFINOPS_OIDC_ISSUER and not (settings.OIDC_RP_CLIENT_ID and settings.OIDC_RP_CLIENT_SECRET):
        problems.append(Error(
            "GPUFINOPS_OIDC_ISSUER is set but the client is not.",
            hint="Set GPUFINOPS_OIDC_CLIENT_ID and GPUFINOPS_OIDC_CLIENT_SECRET (or _FILE) as registered at the "
                 "provider.", id="gpufinops.E101"))
    if not settings.GPUFINOPS_OIDC_ISSUER and not settings.GPUFINOPS_LOCAL_SIGNIN:
        problems.append(Warning(
            "Neither company sign-in nor local accounts are on: nobody can sign in to the pages.",
            hint="Set GPUFINOPS_OIDC_ISSUER, or GPUFINOPS_LOCAL_SIGNIN=1.", id="gpufinops.W101"))
    return problems
