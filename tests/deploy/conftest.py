"""The rendered manifests of every overlay (deploy/render.py), shared by the deploy tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deploy import render as renderer

REPO = Path(__file__).resolve().parents[2]
OVERLAYS = {p.name: p for p in renderer.overlays()}


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[dict[str, Any]]]:
    """overlay name -> its objects."""
    return {name: renderer.render(path) for name, path in OVERLAYS.items()}


def objects_of(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    hits = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(hits) == 1, f"{kind}/{name}: {len(hits)} objects"
    return hits[0]


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["template"]["spec"]


def workloads(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] in ("Deployment", "Job")]
