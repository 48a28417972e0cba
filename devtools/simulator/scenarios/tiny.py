"""The `tiny` scenario: three 8-GPU nodes, one cordoned, and a fragmentation-pending pod."""

from __future__ import annotations

from ..builders import D, H, whole
from ..model import Scenario


def build(sc: Scenario) -> None:
    """3 nodes x 8 H100 in pool 'tiny-pool'. At any t in the last 6 h:
    tiny-0 holds 4+1 GPUs (3 free), tiny-1 holds 6 (2 free), tiny-2 is cordoned and empty;
    a 4-GPU pod is pending (fragmentation)."""
    T0, T1 = sc.t0, sc.t1
    sc.add_namespace("team-a", {"team": "alpha"})
    for i in range(3):
        sc.add_node(
            f"tiny-{i}",
            "H100",
            8,
            {"karpenter.sh/nodepool": "tiny-pool"},
            instance_type="p5.48xlarge",
            unschedulable_from=(T0 - D if i == 2 else None),
        )
    sc.add_pod(
        "team-a",
        "a",
        node="tiny-0",
        start=T0,
        gpus={"nvidia.com/gpu": 4},
        units=whole(sc, "tiny-0", range(4)),
        act="train",
    )
    sc.add_pod(
        "team-a",
        "b",
        node="tiny-0",
        start=T0,
        gpus={"nvidia.com/gpu": 1},
        units=whole(sc, "tiny-0", [4]),
        act="notebook_idle",
        active_until=T0,
    )
    sc.add_pod(
        "team-a",
        "c",
        node="tiny-1",
        start=T0,
        gpus={"nvidia.com/gpu": 6},
        units=whole(sc, "tiny-1", range(6)),
        act="batch",
    )
    sc.add_pod(
        "team-a",
        "pending-4",
        node=None,
        start=None,
        gpus={"nvidia.com/gpu": 4},
        created=T1 - 6 * H,
        node_selector={"karpenter.sh/nodepool": "tiny-pool"},
        pending_message="0/3 nodes are available",
    )
