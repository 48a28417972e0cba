"""The scenario registry: ``build_scenario(name, seed, end, days)`` for `demo` (data, ``demo.py``) with its
exporter variants (``DEMO_VARIANTS``), `tiny`, `large` and `mixed` with its variants (generated in code)."""

from __future__ import annotations

from datetime import UTC, datetime

from ..builders import build_from_spec
from ..dra import check
from ..model import Scenario, floor_hour
from . import demo, large, mixed, tiny

# The demo as real clusters are often set up (issue 25): the same workloads and hours, one exporter shape changed
# (Scenario attributes). Each is a degraded cluster the preflight (`check_cluster`) must name.
DEMO_VARIANTS: dict[str, dict] = {
    "demo-no-node-name": {"exporter_node_name": False},  # dcgm-exporter without NODE_NAME: Hostname = its pod
    "demo-stock-counters": {"stock_counters": True},  # dcgm-exporter's stock list: no SM_ACTIVE
    "demo-ksm-no-labels": {"ksm_labels": ()},  # kube-state-metrics without a label allowlist (its default)
}
NAMES = ("demo", "large", "tiny", *mixed.VARIANTS, *DEMO_VARIANTS)
# Whether the demo gets its DRA node group and HAMi node (``mixed.add_to_demo``) when not told: on, now that the
# product counts DRA and HAMi GPUs (issue 19). Tests that pin the demo's own figures build it with
# ``with_dra=False`` (``--no-with-dra`` for the commands); the demo's variants (issue 25) keep the demo they were
# made from, without them, unless told.
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
    if with_dra is not None and name not in ("demo", *DEMO_VARIANTS):
        raise ValueError("with_dra applies to the demo scenario only")
    # A demo variant is the demo itself (same seed mix, so the same hours), under its own cluster name.
    sc = Scenario("demo" if name in DEMO_VARIANTS else name, seed, end, days)
    if name == "demo" or name in DEMO_VARIANTS:
        build_from_spec(sc, demo.SPEC)
        if (DEMO_WITH_DRA and name == "demo") if with_dra is None else with_dra:
            mixed.add_to_demo(sc)
        for attribute, value in DEMO_VARIANTS.get(name, {}).items():
            setattr(sc, attribute, value)
        sc.cluster_name = f"sim-{name}"
    elif name == "large":
        large.build(sc, large.NODES if large_nodes is None else large_nodes, dra_fraction or 0.0)
    elif name in mixed.VARIANTS:
        mixed.build(sc, name)
    else:
        tiny.build(sc)
    check(sc)
    sc.finalize()
    return sc
