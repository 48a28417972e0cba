"""Structured logs: every line logged during a collection carries the `cluster` and the `bucket` (hour).

`log_context(cluster=..., bucket=...)` binds fields for the code it wraps (a ContextVar, so threads and
Celery tasks never share them); `ContextFilter`, installed on the log handler by `settings.LOGGING`, copies
them onto every record that passes, whichever module logged it (collectors, ledger, Kubernetes client).
Fields given with `extra=` win. `JsonFormatter` writes one JSON object per line (LOG_FORMAT=json, the
default with DEBUG off); `PlainFormatter` appends the fields to the familiar one-line format.

Only the standard library and python-json-logger are imported here: `settings.LOGGING` names these classes
and is read before the apps are loaded.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from pythonjsonlogger.json import JsonFormatter as _JsonFormatter

CONTEXT_FIELDS = ("cluster", "bucket")
_context: ContextVar[dict[str, Any]] = ContextVar("gpufinops_log_context", default={})  # noqa: B039 (never mutated)


@contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Bind `fields` (e.g. cluster="prod", bucket="2026-11-30T10:00:00+00:00") to every log line inside."""
    token = _context.set({**_context.get(), **fields})
    try:
        yield
    finally:
        _context.reset(token)


def current_context() -> dict[str, Any]:
    return dict(_context.get())


class ContextFilter(logging.Filter):
    """Copies the bound fields onto each record (never overwriting what `extra=` set). Never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in _context.get().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class JsonFormatter(_JsonFormatter):
    """One JSON object per line: timestamp, level, logger, message, the bound fields and any `extra=`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if not args:
            kwargs.setdefault("fmt", "%(levelname)s %(name)s %(message)s")
        kwargs.setdefault("rename_fields", {"levelname": "level", "name": "logger"})
        kwargs.setdefault("timestamp", True)  # "timestamp": ISO 8601, UTC
        super().__init__(*args, **kwargs)


class PlainFormatter(logging.Formatter):
    """`2026-11-30 10:03:12,345 WARNING apps.usage.services: message [cluster=prod bucket=...]`."""

    def __init__(self, fmt: str | None = None, *args: Any, **kwargs: Any) -> None:
        super().__init__(fmt or "%(asctime)s %(levelname)s %(name)s: %(message)s", *args, **kwargs)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        bound = [f"{k}={getattr(record, k)}" for k in CONTEXT_FIELDS if getattr(record, k, None) is not None]
        return f"{line} [{' '.join(bound)}]" if bound else line
