"""Company sign-in through an OpenID Connect provider (mozilla-django-oidc underneath).

Authorization code flow with PKCE, state and nonce (the library's); the provider's endpoints come from its
discovery document (`<issuer>/.well-known/openid-configuration`), read once per process; the ID token's
signature is checked against the provider's JWKS, and its issuer, audience and expiry here (the library checks
neither audience nor issuer, and lets an expired token through as an error page). Each sign-in makes the
person's teams and roles exactly what the provider's groups grant (apps/accounts/identity.py, services.py).
On when GPUFINOPS_OIDC_ISSUER is set.
"""

from __future__ import annotations

import logging
from typing import Any

import jwt
import requests
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.http import HttpRequest
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView, OIDCLogoutView

from apps.accounts.identity import groups_claim, roles_from_groups
from apps.accounts.services import sync_identity

log = logging.getLogger(__name__)

# Settings the discovery document answers (mozilla-django-oidc's names -> the document's keys).
DISCOVERED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
    "OIDC_OP_LOGOUT_ENDPOINT": "end_session_endpoint",
}
_discovered: dict[str, dict[str, Any]] = {}


def enabled() -> bool:
    return bool(settings.GPUFINOPS_OIDC_ISSUER)


def discovery() -> dict[str, Any]:
    """The provider's discovery document (cached per issuer); its issuer must be the configured one."""
    issuer = settings.GPUFINOPS_OIDC_ISSUER.rstrip("/")
    if issuer not in _discovered:
        response = requests.get(f"{issuer}/.well-known/openid-configuration", timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        document = response.json()
        if str(document.get("issuer", "")).rstrip("/") != issuer:
            raise ImproperlyConfigured(f"the provider's discovery document names another issuer than {issuer}")
        _discovered[issuer] = document
    return _discovered[issuer]


def oidc_setting(attr: str, *args: Any) -> Any:
    """A mozilla-django-oidc setting: an explicit setting wins, else the discovery document answers."""
    if attr in DISCOVERED and not getattr(settings, attr, None) and enabled():
        value = discovery().get(DISCOVERED[attr])
        if value:
            return value
    return import_from_settings(attr, *args)


class IdentityProviderBackend(OIDCAuthenticationBackend):
    """Signs a person in from a verified ID token and the provider's claims; refuses anything else."""

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return oidc_setting(attr, *args)

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        if not enabled() or request is None or "code" not in request.GET:
            return None  # a password sign-in: not ours
        try:
            return super().authenticate(request, **kwargs)
        except (SuspiciousOperation, requests.RequestException) as exc:
            # A tampered, expired or foreign token, a wrong nonce, an unreachable provider: no sign-in.
            log.warning("company sign-in refused: %s", exc)
            return None

    def verify_token(self, token: Any, **kwargs: Any) -> Any:
        try:
            return super().verify_token(token, **kwargs)
        except (jwt.PyJWTError, KeyError, TypeError, ValueError) as exc:
            # Garbage, a header without `kid`, a key of the wrong kind: a refusal, never a server error.
            raise SuspiciousOperation(f"ID token refused: {type(exc).__name__}") from None

    def _verify_jws(self, payload: Any, key: Any) -> dict[str, Any]:
        header = jwt.get_unverified_header(payload)
        if header.get("alg") != self.OIDC_RP_SIGN_ALGO:
            raise SuspiciousOperation("the ID token's algorithm is not the configured one")
        try:
            claims: dict[str, Any] = jwt.decode(
                payload, key, algorithms=[self.OIDC_RP_SIGN_ALGO], audience=self.OIDC_RP_CLIENT_ID,
                issuer=discovery()["issuer"], leeway=settings.GPUFINOPS_OIDC_CLOCK_SKEW_SECONDS,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.InvalidTokenError as exc:
            raise SuspiciousOperation(f"ID token refused: {type(exc).__name__}") from None
        return claims

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        username = self._username(claims)
        return self.UserModel.objects.filter(username=username) if username else self.UserModel.objects.none()

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        return bool(self._username(claims))

    def create_user(self, claims: dict[str, Any]) -> Any:
        return self._sync(claims)

    def update_user(self, user: Any, claims: dict[str, Any]) -> Any:
        return self._sync(claims)

    def _username(self, claims: dict[str, Any]) -> str:
        value = claims.get(settings.GPUFINOPS_OIDC_USERNAME_CLAIM) or ""
        return value if isinstance(value, str) and 0 < len(value) <= 150 else ""

    def _sync(self, claims: dict[str, Any]) -> Any:
        roles = roles_from_groups(
            groups_claim(claims, settings.GPUFINOPS_OIDC_GROUPS_CLAIM),
            table=settings.GPUFINOPS_OIDC_GROUP_TEAMS, pattern=settings.GPUFINOPS_OIDC_TEAM_GROUP_PATTERN,
            finance_groups=settings.GPUFINOPS_OIDC_FINANCE_GROUPS, staff_groups=settings.GPUFINOPS_OIDC_STAFF_GROUPS,
        )
        email = claims.get("email")
        return sync_identity(self._username(claims), email=email if isinstance(email, str) else "", roles=roles)


class SignInStart(OIDCAuthenticationRequestView):
    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return oidc_setting(attr, *args)


class SignInCallback(OIDCAuthenticationCallbackView):
    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return oidc_setting(attr, *args)


class SignOut(OIDCLogoutView):
    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return oidc_setting(attr, *args)


def provider_logout_url(request: HttpRequest) -> str:
    """Where signing out continues: the provider's end-session endpoint (RP-initiated logout), so the provider's
    own session ends too; back to this site afterwards."""
    endpoint = oidc_setting("OIDC_OP_LOGOUT_ENDPOINT", "")
    back = request.build_absolute_uri(settings.LOGOUT_REDIRECT_URL)
    if not endpoint:
        return back
    params = {"client_id": settings.OIDC_RP_CLIENT_ID, "post_logout_redirect_uri": back}
    id_token = request.session.get("oidc_id_token")
    if id_token:
        params["id_token_hint"] = id_token
    return requests.Request("GET", endpoint, params=params).prepare().url or back
