"""Sign-in throttling: who a request comes from, and when guessing is stopped (django-axes underneath).

Failures are counted per (username, address) and per address, never per username alone: a username-only
count lets anyone lock a named person out from anywhere, and an address-only count at the per-person limit
locks out everyone behind one NAT. A success resets only the signed-in person's own failures from that address,
never another person's (axes' own reset deletes every failure from the address, so signing in as oneself
between guesses would wipe a victim's count).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username
from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import Sum
from django.http import HttpRequest
from ipware.ip import get_client_ip


def client_address(request: HttpRequest) -> str | None:
    """The client's address: REMOTE_ADDR, or with N trusted proxies in front, the N-th `X-Forwarded-For` entry
    from the right (the address the outermost trusted proxy saw). Entries further left are the client's own
    words and never count; a header shorter than the proxy chain falls back to the peer (a request that
    bypassed the proxies, or a spoof), so a client cannot pick whose failures it adds to.

    django-ipware counts only the proxies whose addresses appear in the header (the last proxy is the peer),
    hence `proxy_count=N - 1`.
    """
    peer = request.META.get("REMOTE_ADDR")
    proxies: int = settings.GPUFINOPS_TRUSTED_PROXY_COUNT
    if proxies <= 0:
        return peer
    forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
    if len(forwarded) < proxies:
        return peer
    address, _routable = get_client_ip(
        request, proxy_order="left-most", proxy_count=proxies - 1, strict=False,
        request_header_order=("HTTP_X_FORWARDED_FOR",),
    )
    return address if address and _is_address(address) else peer


def _is_address(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


class PairAndAddressAttempts(AxesDatabaseHandler):  # type: ignore[misc]  # axes ships no types
    """axes' database handler with two limits: AXES_FAILURE_LIMIT per (username, address) and
    GPUFINOPS_SIGNIN_ADDRESS_FAILURE_LIMIT per address (larger: many people share an office address)."""

    def get_failures(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> int:
        # axes compares this one number with AXES_FAILURE_LIMIT: the pair's count, raised to the limit when the
        # address as a whole is over its own limit.
        recent = AccessAttempt.objects.filter(ip_address=request.axes_ip_address)  # type: ignore[attr-defined]
        if settings.AXES_COOLOFF_TIME is not None:
            recent = recent.filter(attempt_time__gte=get_cool_off_threshold(request))
        username = get_client_username(request, credentials)
        pair = _failures(recent.filter(username=username)) if username else 0
        if _failures(recent) >= settings.GPUFINOPS_SIGNIN_ADDRESS_FAILURE_LIMIT:
            return max(pair, settings.AXES_FAILURE_LIMIT)
        return pair

    def reset_user_attempts(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> int:
        # Called on a successful sign-in (AXES_RESET_ON_SUCCESS): only this person's failures from this address.
        username = get_client_username(request, credentials)
        deleted, _ = AccessAttempt.objects.filter(
            username=username, ip_address=request.axes_ip_address  # type: ignore[attr-defined]
        ).delete()
        return deleted


def _failures(attempts: Any) -> int:
    return int(attempts.aggregate(total=Sum("failures_since_start"))["total"] or 0)
