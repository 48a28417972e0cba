"""The scenario registry: ``build_scenario(name, seed, end, days)`` for `demo` (data, ``demo.py``), `tiny`
and `large` (generated in code)."""

from __future__ import annotations

from datetime import UTC, datetime

from ..builders import build_from_spec
from ..model import Scenario, floor_hour
from . import demo, large, tiny

NAMES = ("demo", "large", "tiny")


def build_scenario(
    name: str, seed: int = 0, end: datetime | None = None, days: float = 7, large_nodes: int | None = None
) -> Scenario:
    """``large_nodes``: `large` only, its number of 8-GPU nodes (default 1,250 = 10,000 GPUs)."""
    if end is None:
        end = floor_hour(datetime.now(UTC))
    if end.tzinfo is None:
        raise ValueError("end must be timezone-aware")
    end = end.astimezone(UTC)
    if end != floor_hour(end):
        raise ValueError("end must be hour-aligned")
    if name not in NAMES:
        raise ValueError(f"unknown scenario {name!r} ({', '.join(NAMES)})")
    if large_nodes is not None and name != "large":
        raise ValueError("large_nodes applies to the large scenario only")
    sc = Scenario(name, seed, end, days)
    if name == "demo":
        build_from_spec(sc, demo.SPEC)
    elif name == "large":
        large.build(sc, large.NODES if large_nodes is None else large_nodes)
    else:
        tiny.build(sc)
    sc.finalize()
    return sc
