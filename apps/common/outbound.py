"""Outbound HTTP to addresses people typed in (team webhooks): only to the public internet, unless the operator
names an internal host in GPUFINOPS_WEBHOOK_ALLOWED_HOSTS.

A staff user or a compromised team channel must not turn gpufinops into a proxy into its own network: the
database, Redis, the cloud's metadata service (169.254.169.254, which hands out credentials), the cluster's
API. So the target's every address is checked when the connection is made (not before, so a name cannot
resolve to a public address for the check and a private one for the request), the socket connects to the
checked address itself, redirects are never followed, proxies from the environment are not used, and the
timeouts are bounded.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any
from urllib.parse import urlsplit

import requests
from django.conf import settings
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import NewConnectionError
from urllib3.util import connection as urllib3_connection

MAX_TIMEOUT_SECONDS = 30.0
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# IPv6 prefixes that carry an IPv4 address (NAT64), checked as the IPv4 address they carry.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class RefusedTarget(Exception):
    """The target is not a public address (or its URL is not http(s))."""


def refused_address(address: IPAddress) -> bool:
    """Loopback, private, link-local (the metadata service), shared, multicast, reserved, unspecified, and the
    IPv6 forms that carry such an IPv4 address (mapped, 6to4, Teredo, NAT64)."""
    embedded: list[IPAddress] = []
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped:
            embedded.append(address.ipv4_mapped)
        if address.sixtofour:
            embedded.append(address.sixtofour)
        if address.teredo:
            embedded.extend(address.teredo)
        if address in _NAT64:
            embedded.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return not address.is_global or address.is_multicast or any(refused_address(a) for a in embedded)


def allowed_host(host: str) -> bool:
    return host.lower().rstrip(".") in {h.lower().rstrip(".") for h in settings.GPUFINOPS_WEBHOOK_ALLOWED_HOSTS}


def checked_addresses(host: str, port: int) -> list[str]:
    """The addresses of `host` to connect to; RefusedTarget when any of them is not public (a name with one
    private address among public ones is refused: which one is used is not ours to choose)."""
    try:
        found = socket.getaddrinfo(host.strip("[]"), port, urllib3_connection.allowed_gai_family(), socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise RefusedTarget(f"{host} does not resolve ({exc})") from None
    addresses = list(dict.fromkeys(str(sa[0]) for *_, sa in found))
    if allowed_host(host):
        return addresses
    for address in addresses:
        if refused_address(ipaddress.ip_address(address.split("%")[0])):
            raise RefusedTarget(f"{host} resolves to {address}, not a public address; GPUFINOPS_WEBHOOK_ALLOWED_HOSTS "
                                "may name an internal host")
    return addresses


def target_problem(url: str) -> str | None:
    """Why `url` cannot be a webhook target, checked now (None when it can, or when its name does not resolve
    yet: the check is repeated at every connection)."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return "not a URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "http:// or https:// URL with a host only"
    try:
        checked_addresses(parts.hostname, port)
    except RefusedTarget as exc:
        if "does not resolve" in str(exc):
            return None
        return str(exc)
    return None


class _Checked:
    """Connects to a checked address of the host (the host name still goes to TLS: SNI and certificate)."""

    host: str
    port: int
    timeout: Any
    source_address: Any
    socket_options: Any

    def _new_conn(self) -> socket.socket:
        try:
            addresses = checked_addresses(self.host, self.port)
        except RefusedTarget as exc:
            raise NewConnectionError(self, f"refused: {exc}") from None  # type: ignore[arg-type]
        error: OSError | None = None
        for address in addresses:
            try:
                return urllib3_connection.create_connection(
                    (address, self.port), self.timeout, source_address=self.source_address,
                    socket_options=self.socket_options,
                )
            except OSError as exc:
                error = exc
        raise NewConnectionError(self, f"Failed to establish a new connection: {error}")  # type: ignore[arg-type]


class _CheckedHTTPConnection(_Checked, HTTPConnection):
    pass


class _CheckedHTTPSConnection(_Checked, HTTPSConnection):
    pass


class _CheckedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _CheckedHTTPConnection


class _CheckedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _CheckedHTTPSConnection


class _CheckedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _CheckedHTTPPool, "https": _CheckedHTTPSPool}


def timeout() -> tuple[float, float]:
    """(connect, read) seconds: GPUFINOPS_WEBHOOK_TIMEOUT, at most MAX_TIMEOUT_SECONDS."""
    seconds = min(max(float(settings.GPUFINOPS_WEBHOOK_TIMEOUT), 0.1), MAX_TIMEOUT_SECONDS)
    return seconds, seconds


def post_json(url: str, body: str) -> requests.Response:
    """POST `body` (JSON text) to `url` under the rules above. Raises RefusedTarget before any connection for a
    non-http(s) URL; a refused address surfaces as requests' ConnectionError with "refused:" in it."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RefusedTarget("http:// or https:// URL with a host only")
    with requests.Session() as session:
        session.trust_env = False  # no HTTP(S)_PROXY: a proxy would make the address check meaningless
        session.mount("http://", _CheckedAdapter(max_retries=0))
        session.mount("https://", _CheckedAdapter(max_retries=0))
        return session.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=timeout(),
                            allow_redirects=False)
