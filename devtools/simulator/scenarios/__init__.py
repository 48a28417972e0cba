"""The scenario registry: ``build_scenario(name, seed, end, days)`` for `demo` (data, ``demo.py``), `tiny`, `large`
and `mixed` with its variants (generated in code)."""

from __future__ import annotations

from datetime import UTC, datetime

from ..builders import build_from_spec
from ..dra import check
from ..model import Scenario, floor_hour
from . import demo, large, mixed, tiny

NAMES = ("demo", "large", "tiny", *mixed.VARIANTS)
# Whether the demo gets its DRA node group and HAMi node (``mixed.add_to_demo``) when not told: on, now that the
# product counts DRA and HAMi GPUs (issue 19). Tests that pin the demo's own figures build it with
# ``with_dra=False`` (``--no-with-dra`` for the commands).
DEMO_WITH_DRA = True


def build_scenario(
    name: str,
    seed: int = 0,
    end: datetime | None = None,
    days: float = 7,
    large_nodes: int | None = None,
    dra_fraction: float | None = None,
    with_dra: bool | None = None,
) -> Scenario:
    """``large_nodes``: `large` only, its number of 8-GPU nodes (default 1,250 = 10,000 GPUs); ``dra_fraction``:
    `large` only, the fraction of its nodes whose GPUs NVIDIA's DRA driver hands out (default 0);
    ``with_dra``: `demo` only, add a DRA node group and a HAMi node (default ``DEMO_WITH_DRA``)."""
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
    if dra_fraction is not None and name != "large":
        raise ValueError("dra_fraction applies to the large scenario only")
    if dra_fraction is not None and not 0 <= dra_fraction <= 1:
        raise ValueError("dra_fraction must be within [0, 1]")
    if with_dra is not None and name != "demo":
        raise ValueError("with_dra applies to the demo scenario only")
    sc = Scenario(name, seed, end, days)
    if name == "demo":
        build_from_spec(sc, demo.SPEC)
        if DEMO_WITH_DRA if with_dra is None else with_dra:
            mixed.add_to_demo(sc)
    elif name == "large":
        large.build(sc, large.NODES if large_nodes is None else large_nodes, dra_fraction or 0.0)
    elif name in mixed.VARIANTS:
        mixed.build(sc, name)
    else:
        tiny.build(sc)
    check(sc)
    sc.finalize()
    return sc
