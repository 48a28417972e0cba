"""What every finding of the oracle shares: the settings' defaults the truth uses, runs of flagged hours, the fields
of a finding."""

from __future__ import annotations

from datetime import datetime, timedelta

from devtools.simulator.model import Scenario

from .ledger import gpu_model

# The product's settings' defaults (the findings engineer's rules read them; these are the values the truth uses).
IDLE_THRESHOLD = 0.01  # GPUFINOPS_IDLE_THRESHOLD: activity below which an allocated GPU is idle
IDLE_MIN_HOURS = 2  # GPUFINOPS_IDLE_MIN_HOURS
IDLE_HELD_FB_MIB = 1024.0  # framebuffer in use above which an idle allocation is idle-held (1 GiB)
STRAGGLER_FRACTION = 0.6  # slowest GPU below this fraction of the workload's median
STRAGGLER_MIN_HOURS = 2
UNATTRIBUTED_THRESHOLD = 0.05  # SM activity of a device no pod holds
# XIDs that say the GPU (not the application) failed: ECC/DBE (48, 63, 64, 92, 94, 95, 140), fell off the bus
# (79), NVLink (74), micro-controller/GSP (61, 62, 119, 120). Application XIDs (13, 31, 43, 45, ...) are not.
HARDWARE_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})
# Clock-event reasons that throttle (DCGM_FI_DEV_CLOCKS_EVENT_REASONS bits): HW slowdown, SW thermal, HW thermal,
# HW power brake. GPU idle (0x1), applications clocks setting (0x2), SW power cap (0x4), sync boost (0x10) and
# display clocks (0x100) are not.
THROTTLE_REASONS = {0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake"}
THROTTLE_BITS = sum(THROTTLE_REASONS)
UNHEALTHY_REASONS = ("xid", "throttle", "remap", "ecc", "vanished")
FINDING_KINDS = ("unhealthy_gpu", "straggler", "unattributed_activity", "idle_held", "idle_claim", "oversubscribed_gpu",
                 "missing_attribution")


def runs(hours: list, min_hours: int = 1) -> list[list]:
    """Maximal runs of consecutive hours (sorted datetimes) at least ``min_hours`` long."""
    out: list = []
    for h in hours:
        if out and out[-1][-1] + timedelta(hours=1) == h:
            out[-1].append(h)
        else:
            out.append([h])
    return [r for r in out if len(r) >= min_hours]


def finding(sc: Scenario, kind: str, run: list, last_hour: datetime, **fields) -> dict:
    base = {"kind": kind, "reason": None, "cluster": sc.cluster_name, "team": None, "namespace": None,
            "workload": None, "pod": None, "node": None, "gpu_uuid": None, "gpu_instance_id": "", "gpu_model": None}
    base.update(fields)
    base["start"] = run[0]
    base["end"] = None if run[-1] == last_hour else run[-1] + timedelta(hours=1)
    base["hours"] = len(run)
    return base


def model(sc: Scenario, node: str) -> str:
    return gpu_model(sc.node_by_name[node])


SUBJECT = ("team", "namespace", "workload", "pod")


def holders(run: list, by_hour: dict, key) -> dict:
    """(team, namespace, workload, pod) -> GPU-hours the pods held over the run's hours: ``by_hour[(key, hour)]``
    lists (pod row, allocated GPU-hours)."""
    out: dict = {}
    for h in run:
        for r, allocated in by_hour.get((key, h), ()):
            k = tuple(r[f] for f in SUBJECT)
            out[k] = out.get(k, 0.0) + allocated
    return out


def holder_rows(held: dict) -> list[dict]:
    return [{**dict(zip(SUBJECT, k, strict=True)), "gpu_hours": v} for k, v in sorted(held.items())]


def top_holder(held: dict) -> dict:
    """The subject fields of the holder with the most GPU-hours (ties by team, namespace, workload, pod); none
    when nobody held it."""
    if not held:
        return {}
    return dict(zip(SUBJECT, sorted(held.items(), key=lambda kv: (-kv[1], kv[0]))[0][0], strict=True))
