"""Skip locally, fail in CI: what a test does when a real service it needs is missing."""

from __future__ import annotations

import os
import shutil
import socket
from typing import NoReturn

import pytest

REQUIRE_SERVICES_ENV = "GPUFINOPS_REQUIRE_SERVICES"


def services_required() -> bool:
    """True when GPUFINOPS_REQUIRE_SERVICES=1: a missing service is a failure, not a skip."""
    return os.environ.get(REQUIRE_SERVICES_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def require_service(name: str, reason: str) -> NoReturn:
    """Skip the test (locally) or fail it (GPUFINOPS_REQUIRE_SERVICES=1) because `name` is unavailable."""
    message = f"{name} unavailable: {reason}"
    if services_required():
        pytest.fail(f"{message} ({REQUIRE_SERVICES_ENV}=1)", pytrace=False)
    pytest.skip(message)


def require_binary(name: str) -> str:
    """Absolute path of executable `name`, or require_service(...) when it is not on PATH."""
    path = shutil.which(name)
    if path is None:
        require_service(name, f"`{name}` is not on PATH (Debian: apt-get install -y prometheus)")
    return path


def tcp_reachable(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when a TCP connection to host:port succeeds within `timeout` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
