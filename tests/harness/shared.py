"""The project workspace's shared directory (spec and verbatim real samples), for the few tests that check the
repository's own fixtures (tests/fixtures/) against it. Nothing else in the suite reads it, and nothing reads it at
import: a clone without it passes its tests, these skip saying which path is missing (GPUFINOPS_REQUIRE_SERVICES=1,
as in CI: they fail instead).
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.harness.services import require_service

SHARED_DIR_ENV = "GPUFINOPS_SHARED_DIR"
REPO_ROOT = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    """GPUFINOPS_SHARED_DIR, else `shared` beside the repository (the workspace's layout)."""
    configured = os.environ.get(SHARED_DIR_ENV, "").strip()
    return Path(configured) if configured else REPO_ROOT.parent / "shared"


def shared_file(relative: str) -> Path:
    """The file at `relative` under the shared directory, or require_service(...) when it is not there."""
    path = shared_dir() / relative
    if not path.is_file():
        require_service("shared directory", f"{path} does not exist (set {SHARED_DIR_ENV} to the workspace's shared/)")
    return path
