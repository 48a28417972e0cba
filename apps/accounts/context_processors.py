"""What the sign-in page offers: company sign-in (OIDC) when configured, local accounts unless turned off."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def signin(request: HttpRequest) -> dict[str, bool]:
    return {"company_signin": bool(settings.GPUFINOPS_OIDC_ISSUER), "local_signin": settings.GPUFINOPS_LOCAL_SIGNIN}
