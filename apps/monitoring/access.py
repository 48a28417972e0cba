"""Who may read `/metrics`: a bearer token (`GPUFINOPS_METRICS_TOKEN`), a client address inside
`GPUFINOPS_METRICS_ALLOWED_NETWORKS` (default: loopback only), or a signed-in staff user.

The address is REMOTE_ADDR, the peer of the web process: behind a proxy or an ingress that is the proxy,
so never route /metrics through one without the token (docs/operations.md).
"""

from __future__ import annotations

import hmac
import ipaddress
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest


@lru_cache(maxsize=8)
def _networks(spec: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(n.strip(), strict=False) for n in spec if n.strip())


def address_allowed(address: str | None) -> bool:
    if not address:
        return False
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in net for net in _networks(tuple(settings.GPUFINOPS_METRICS_ALLOWED_NETWORKS)))


def token_matches(request: HttpRequest) -> bool:
    expected = settings.GPUFINOPS_METRICS_TOKEN
    if not expected:
        return False
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), expected.encode())


def may_scrape(request: HttpRequest) -> bool:
    if token_matches(request) or address_allowed(request.META.get("REMOTE_ADDR")):
        return True
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated and user.is_staff)
