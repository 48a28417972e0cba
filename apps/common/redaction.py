"""The one home of URL redaction: webhook and Prometheus URLs are credentials (a chat webhook's path is its key,
a Prometheus URL may carry a token in its query). Whatever people or logs see of them is `scheme://host:port`.

`redact_url` is what a page, the admin, an API answer or a command prints for a URL; `scrub` cleans an error
text (an exception from requests or urllib3, which quote the URL, its path or its query) before it is logged or
stored as `last_error`.
"""

from __future__ import annotations

import base64
import logging
import re
from urllib.parse import quote, unquote, urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
_ANY_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>()\[\]{},]+")
_UNREADABLE = "(unreadable URL)"


def redact_url(url: str) -> str:
    """`https://user:pw@hooks.example/T0/B0/xyz?token=1` -> `https://hooks.example:443`; "" stays ""."""
    if not url:
        return ""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return _UNREADABLE
    host = parts.hostname or ""
    if not parts.scheme or not host:
        return _UNREADABLE
    host = f"[{host}]" if ":" in host else host
    port = port or DEFAULT_PORTS.get(parts.scheme.lower())
    return f"{parts.scheme.lower()}://{host}" + (f":{port}" if port else "")


def _secret_parts(url: str) -> list[str]:
    """Every piece of `url` beyond scheme, host and port, as it may appear in an error text (raw, unquoted,
    quoted), longest first so a longer piece is replaced before a piece inside it."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return [url]
    pieces = {url, url.rstrip("/")}
    tail = parts.path + (f"?{parts.query}" if parts.query else "") + (f"#{parts.fragment}" if parts.fragment else "")
    for piece in (tail, parts.path, parts.query, parts.fragment, parts.username or "", parts.password or ""):
        if len(piece.strip("/")) < 2:  # "/" or one character: not a secret, and everywhere in text
            continue
        pieces |= {piece, unquote(piece), quote(unquote(piece), safe="/?&=:@!$'()*+,;-._~")}
    return sorted((p for p in pieces if p), key=len, reverse=True)


def scrub(text: str, *urls: str) -> str:
    """`text` with every secret piece of `urls` replaced by their redacted form, and any other URL in it
    (a redirect's Location, a proxy) cut to scheme://host:port."""
    for url in urls:
        if not url:
            continue
        redacted = redact_url(url)
        for piece in _secret_parts(url):
            text = text.replace(piece, redacted)
    return _ANY_URL.sub(lambda m: redact_url(m.group(0)), text)


def hide(text: str, *credentials: str) -> str:
    """`text` without any of `credentials` (a bearer token, user:password, the password alone), raw or in the
    base64 of a Basic Authorization header a server may echo back."""
    pieces: set[str] = set()
    for credential in credentials:
        if len(credential) < 4:  # too short to be a secret worth searching for, and everywhere in text
            continue
        pieces |= {credential, base64.b64encode(credential.encode()).decode()}
        user, sep, password = credential.partition(":")
        if sep and len(password) >= 4:
            pieces.add(password)
    for piece in sorted(pieces, key=len, reverse=True):
        text = text.replace(piece, "…")
    return text


class HttpClientLogFilter:
    """A logging filter for urllib3's loggers, which print request paths and URLs ('"GET /hooks/T0/B0/key
    HTTP/1.1" 500', 'Retrying ... : /tenant/<token>/api/v1/query?...'): paths become "/…" and URLs
    scheme://host:port. Attached to those loggers in settings.LOGGING, so every handler sees the clean line."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple):
            record.args = tuple(_clean_arg(a) for a in args)
        elif isinstance(args, dict):
            record.args = {k: _clean_arg(v) for k, v in args.items()}
        # The whole line, formatted once with the cleaned arguments, then any URL left in it cut to the host.
        record.msg, record.args = scrub(record.getMessage()), None
        return True


def _clean_arg(value: object) -> object:
    if isinstance(value, str):
        if value.startswith("/"):
            return "/…"
        if "://" in value:
            return scrub(value)
    return value
