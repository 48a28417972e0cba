"""The Prometheus collector's vocabulary: the DCGM and kube-state-metrics names it reads, the recording rules' names,
the labels it aggregates by, and the small helpers every query of the collector and of its findings queries shares
(a range for a bucket, a sample's value and device, alternatives of a renamed metric, a regex of names). Split from
`prometheus.py` so `prometheus_findings.py` and the source read the same names without importing each other."""

from __future__ import annotations

import functools
import logging
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from apps.usage.activity import DEFAULT_METRICS, SIGNALS
from apps.usage.sources import (
    SourceError,
)

log = logging.getLogger(__name__)




class PrometheusError(SourceError):
    """Prometheus unreachable, or its answer unusable."""


def ksm_resource(name: str) -> str | None:
    """kube-state-metrics sanitizes resource names (`nvidia.com/mig-1g.10gb` -> `nvidia_com_mig_1g_10gb`)."""
    if not name.startswith("nvidia_com_"):
        return None
    rest = name[len("nvidia_com_") :]
    if rest == "gpu":
        return "nvidia.com/gpu"
    if rest == "gpu_shared":
        return "nvidia.com/gpu.shared"
    m = re.match(r"^mig_(\d+)g_(\d+)gb(.*)$", rest)
    if m:
        return f"nvidia.com/mig-{m.group(1)}g.{m.group(2)}gb{m.group(3).replace('_', '.')}"
    return "nvidia.com/" + rest  # unknown: kept so the ledger can report it, never counted


@functools.lru_cache(maxsize=1024)  # a handful of keys (settings), asked for each of ~10,000 label series a bucket
def ksm_label(key: str) -> str:
    """kube-state-metrics writes a Kubernetes label `a.b/c` as the metric label `label_a_b_c`."""
    return "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", key)


def unsanitized(metric_labels: dict[str, str], keys: Sequence[str]) -> dict[str, str]:
    """The Kubernetes labels `keys` read back from a kube-state-metrics `*_labels` series."""
    return {key: metric_labels[ksm_label(key)] for key in keys if ksm_label(key) in metric_labels}


def window(start: datetime, end: datetime) -> tuple[str, datetime]:
    """Range and evaluation time covering the samples of [start, end) exactly once.

    Prometheus 2.x ranges include both ends, so a bucket evaluated at its end would also read the
    first sample of the next bucket; evaluating 1 ms earlier over the same length reads
    [start, end - 1 ms] on 2.x and (start - 1 ms, end - 1 ms] on 3.x: the same samples.
    """
    ms = max(int((end - start).total_seconds() * 1000), 1)
    return f"{ms}ms", end - timedelta(milliseconds=1)


def sample_time(v: float) -> datetime:
    return datetime.fromtimestamp(v, tz=UTC)


def sample_value(sample: dict[str, Any]) -> float | None:
    try:
        v = float(sample["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return None if math.isnan(v) or math.isinf(v) else v


# ---- Findings: health fields, memory held, activity of devices nobody holds (apps/findings) ----

XID_METRICS = ("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR")  # DCGM 4.6 renames the field (same ID 230)
CLOCK_EVENT_METRICS = ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")  # field 112
POWER_VIOLATION = "DCGM_FI_DEV_POWER_VIOLATION"
THERMAL_VIOLATION = "DCGM_FI_DEV_THERMAL_VIOLATION"
UNCORRECTABLE_REMAPPED_ROWS = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
ECC_DBE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
FB_USED = "DCGM_FI_DEV_FB_USED"
# One physical GPU, whatever the label spelling (MIG instances carry their parent's UUID).
DEVICE_BY = "UUID, uuid, Hostname, hostname"
# Clock-event reasons below this value carry none of the bits above power capping (gpu_idle 0x1,
# clocks_setting 0x2, sw_power_cap 0x4): GPUs whose bitmask never reached it are not asked further.
CLOCK_EVENT_CANDIDATE = 8
# At most this many names or UUIDs in one regex matcher; more and the query goes unrestricted.
MAX_REGEX_NAMES = 300


# ---- Recording rules (deploy/monitoring/gpufinops-recording.yaml, optional) ----
# One recorded metric: every activity signal and the framebuffer in use of the device series carrying a pod, per pod
# and GPU (`max by` the labels read below), told apart by a `signal` label. A bucket then reads all of them in one
# query instead of one per signal (raw series of different metrics cannot share one: `*_over_time` drops their
# names and their label sets collide).
RECORDED = "pod_gpu:gpufinops_dcgm:max"
# The labels a signal's series is read by (`_signal_series`: the pod, the GPU, the MIG instance, the HAMi slot and the
# DRA device), the rules' `max by` too: the raw query aggregates to them, so Prometheus encodes and this process
# decodes ~40 % of the bytes it did with every label of the exporter's series (its target, model, driver, PCI bus).
SIGNAL_BY = ("namespace, pod, exported_namespace, exported_pod, UUID, uuid, gpu_uuid, GPU_I_ID, GPU_I_PROFILE, vgpu, "
             "dra_mig_device_uuid")
RECORDED_SIGNALS: dict[str, str] = {**{s: DEFAULT_METRICS[s] for s in SIGNALS}, "fb_used": FB_USED}
# The rules' one series without labels, evaluated with them: they cover a bucket when it has samples in the bucket's
# first and in its last RECORDED_EDGE (two evaluations at Prometheus' default 1m evaluation interval; the shipped
# group evaluates every 30 s).
RECORDED_HEARTBEAT = "gpufinops:recording_rules:heartbeat"
RECORDED_EDGE = timedelta(minutes=2)
# The health fields of every physical GPU (`max by (DEVICE_BY)`), told apart by a `field` label, with the raw metrics
# each records (a rename `or`-ed in): the findings' first health round asks them in one query where the raw series
# need one per field. XID is read raw (MIG instances report their own code under their parent's UUID, and its last
# code is read per series).
HEALTH_RECORDED = "gpu:gpufinops_health:max"
HEALTH_RECORDED_FIELDS: dict[str, tuple[str, ...]] = {
    "clock_events": CLOCK_EVENT_METRICS, "row_remap_failure": (ROW_REMAP_FAILURE,),
    "power_violation": (POWER_VIOLATION,), "thermal_violation": (THERMAL_VIOLATION,),
    "uncorrectable_remapped_rows": (UNCORRECTABLE_REMAPPED_ROWS,), "ecc_dbe": (ECC_DBE,),
}


def device_of(m: Mapping[str, str]) -> tuple[str, str]:
    return m.get("hostname") or m.get("Hostname") or "", m.get("UUID") or m.get("uuid") or ""


def alternatives(fn: str, metrics: Sequence[str], matchers: str, rng: str) -> str:
    """`fn(a{..}[r]) or fn(b{..}[r])`: one name or its rename, never both names colliding in one answer."""
    return " or ".join(f"{fn}({m}{{{matchers}}}[{rng}])" for m in metrics)


def regex_of(values: Collection[str]) -> str:
    return "|".join(re.escape(v) for v in sorted(values)).replace("\\", "\\\\")


def max_by(by: str, answer: Iterable[dict]) -> list[dict]:
    """PromQL's `max by (by) (…)` over an answer's samples: per distinct value of the `by` labels, the sample with the
    highest value (its other labels kept: readers look only at `by`)."""
    keys = [k.strip() for k in by.split(",")]
    top: dict[tuple, tuple[float, dict]] = {}
    for r in answer:
        v = sample_value(r)
        if v is None:
            continue
        m = r["metric"]
        key = tuple(m.get(k, "") for k in keys)
        if key not in top or v > top[key][0]:
            top[key] = (v, r)
    return [r for _v, r in top.values()]
