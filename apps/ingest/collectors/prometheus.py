"""Prometheus collector: instant queries at a bucket's end with *_over_time, so PromQL aggregates
and no raw samples stream into Python. Implements the ledger's `MetricsSource`.

Reads two families: DCGM activity per device series carrying a pod identity, and the
kube-state-metrics history used to rebuild allocations for hours the Kubernetes collector missed.
"""

from __future__ import annotations

import base64
import functools
import logging
import math
import re
import threading
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry

from apps.common import decoding
from apps.common.secrets import SecretError
from apps.inventory.models import Cluster
from apps.usage.activity import DEFAULT_METRICS, SIGNAL_SCALE, SIGNALS, default_signal
from apps.usage.ledger import SeriesFact
from apps.usage.sources import (
    HISTORY_STEP_SECONDS,
    DeviceActivity,
    DeviceHealth,
    NodeHistory,
    PodHistory,
    PodMemory,
    SourceError,
    VanishedDevice,
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


def _ts(v: float) -> datetime:
    return datetime.fromtimestamp(v, tz=UTC)


def _value(sample: dict[str, Any]) -> float | None:
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


def _device(m: Mapping[str, str]) -> tuple[str, str]:
    return m.get("hostname") or m.get("Hostname") or "", m.get("UUID") or m.get("uuid") or ""


def _alternatives(fn: str, metrics: Sequence[str], matchers: str, rng: str) -> str:
    """`fn(a{..}[r]) or fn(b{..}[r])`: one name or its rename, never both names colliding in one answer."""
    return " or ".join(f"{fn}({m}{{{matchers}}}[{rng}])" for m in metrics)


def _regex(values: Collection[str]) -> str:
    return "|".join(re.escape(v) for v in sorted(values)).replace("\\", "\\\\")


def _max_by(by: str, answer: Iterable[dict]) -> list[dict]:
    """PromQL's `max by (by) (…)` over an answer's samples: per distinct value of the `by` labels, the sample with the
    highest value (its other labels kept: readers look only at `by`)."""
    keys = [k.strip() for k in by.split(",")]
    top: dict[tuple, tuple[float, dict]] = {}
    for r in answer:
        v = _value(r)
        if v is None:
            continue
        m = r["metric"]
        key = tuple(m.get(k, "") for k in keys)
        if key not in top or v > top[key][0]:
            top[key] = (v, r)
    return [r for _v, r in top.values()]


class _FindingQueries:
    """Mixed into PrometheusSource: every query is one instant query at the bucket's end aggregated per GPU
    (`max by (UUID, Hostname)`) or per pod series, and most are filtered in PromQL (`> 0`) so only GPUs with
    something to report come back. Only the subset of PromQL the simulator answers is used (no arithmetic)."""

    metrics: dict[str, str]
    pod_labels: str | None

    def query(self, promql: str, at: datetime) -> list[dict]:  # pragma: no cover (PrometheusSource's)
        raise NotImplementedError

    def query_all(self, queries: Sequence[tuple[str, datetime]]) -> list[list[dict]]:  # pragma: no cover
        raise NotImplementedError

    @staticmethod
    def _by_device(answer: list[dict]) -> dict[tuple[str, str], float]:
        out: dict[tuple[str, str], float] = {}
        for r in answer:
            v = _value(r)
            node, uuid = _device(r["metric"])
            if v is not None and uuid:
                out[(node, uuid)] = v
        return out

    @staticmethod
    def _top(answer: list[dict]) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], str]]:
        """Per GPU: the value, and which label spells its UUID (for a matcher naming those GPUs)."""
        label_of: dict[tuple[str, str], str] = {}
        top: dict[tuple[str, str], float] = {}
        for r in answer:
            v, key = _value(r), _device(r["metric"])
            if v is not None and key[1]:
                top[key] = v
                label_of[key] = "UUID" if r["metric"].get("UUID") else "uuid"
        return top, label_of

    def _uuid_matcher(self, devices: Collection[tuple[str, str]], label_of: Mapping[tuple[str, str], str]) -> str:
        """A matcher restricting a query to these GPUs, or "" (unrestricted) when too many or mixed labels."""
        labels = {label_of.get(d, "UUID") for d in devices}
        if len(devices) > MAX_REGEX_NAMES or len(labels) != 1:
            return ""
        return f'{labels.pop()}=~"{_regex({u for _n, u in devices})}"'

    def rules_cover(self, start: datetime, end: datetime) -> bool:  # pragma: no cover (PrometheusSource's)
        raise NotImplementedError

    # Counters whose increase over the bucket is reported: max - min per GPU (PromQL arithmetic is left out: see the
    # class), the minimum asked only for GPUs whose counter is above 0 at all. The last item: the counter's field in
    # HEALTH_RECORDED.
    HEALTH_COUNTERS = ((POWER_VIOLATION, "power", 1e-9, "power_violation"),
                       (THERMAL_VIOLATION, "thermal", 1e-9, "thermal_violation"),
                       (UNCORRECTABLE_REMAPPED_ROWS, "remapped", 1.0, "uncorrectable_remapped_rows"),
                       (ECC_DBE, "dbe", 1.0, "ecc_dbe"))

    @staticmethod
    def _xid_query(fn: str, matcher: str, rng: str) -> str:
        # XID: the value is the last code seen, not a count. Codes seen: the highest and the last.
        return f"max by ({DEVICE_BY}) ({_alternatives(fn, XID_METRICS, matcher, rng)}) > 0"

    @classmethod
    def _health_queries(cls, start: datetime, end: datetime) -> list[tuple[str, datetime]]:
        """device_health's first round from the raw series: which GPUs have anything to report. The last XID code is
        asked with the details, for the GPUs with a code only (a last code above 0 is a code seen, so the GPUs with
        one are among those): asked of every GPU here, it read every XID series a second time."""
        rng, at = window(start, end)
        clocks = f"max by ({DEVICE_BY}) ({_alternatives('max_over_time', CLOCK_EVENT_METRICS, '', rng)})"
        return [
            (cls._xid_query("max_over_time", "", rng), at),
            # Clock events: GPUs whose bitmask reached a counted bit (then its min, max and mean for those).
            (f"{clocks} >= {CLOCK_EVENT_CANDIDATE}", at),
            (f"max by ({DEVICE_BY}) (max_over_time({ROW_REMAP_FAILURE}[{rng}])) > 0", at),
            *((f"max by ({DEVICE_BY}) (max_over_time({metric}[{rng}])) > 0", at)
              for metric, _n, _s, _f in cls.HEALTH_COUNTERS),
        ]

    @staticmethod
    def _health_recorded_queries(start: datetime, end: datetime) -> list[tuple[str, datetime]]:
        """device_health's first round when the recording rules cover the bucket: the highest XID code from the raw
        series, every other field's maximum from HEALTH_RECORDED in one query. Each recorded sample is the `max by
        (DEVICE_BY)` of the raw samples at one scrape, so its maximum over the bucket is the raw query's. The last
        XID code is asked with the details, for the GPUs with a code (a last code above 0 is a code seen). Clock events
        are filtered in Prometheus as the raw query filters them (`>= CLOCK_EVENT_CANDIDATE`, the other fields `> 0`),
        so the answer holds only GPUs with something to report (it held every GPU with any bit set before)."""
        rng, at = window(start, end)
        return [(_FindingQueries._xid_query("max_over_time", "", rng), at),
                (f'max_over_time({HEALTH_RECORDED}{{field="clock_events"}}[{rng}]) >= {CLOCK_EVENT_CANDIDATE}'
                 f' or max_over_time({HEALTH_RECORDED}{{field!="clock_events"}}[{rng}]) > 0', at)]

    def _health_first_round(self, start: datetime, end: datetime) -> list[list[dict]]:
        """(xid max, clock events >= CLOCK_EVENT_CANDIDATE, row remap failure, *counters' maxima) as
        `_health_queries` answers them, from the raw or the recorded series; the last XID codes are asked with the
        details either way."""
        if not self.rules_cover(start, end):
            return self.query_all(self._health_queries(start, end))
        xid_max, recorded = self.query_all(self._health_recorded_queries(start, end))
        by_field: dict[str, list[dict]] = defaultdict(list)
        for r in recorded:
            by_field[r["metric"].get("field", "")].append(r)
        counters = [by_field[f] for _m, _n, _s, f in self.HEALTH_COUNTERS]
        return [xid_max, by_field["clock_events"], by_field["row_remap_failure"], *counters]

    def _xid_last_query(self, xid_max: list[dict], rng: str, at: datetime) -> tuple[str, datetime] | None:
        """The last XID code of the GPUs with a code (`xid_max`: their highest, above 0); None when no GPU had one.
        `prefetch`'s round asks it as soon as `xid_max` is in, off the findings' path; `device_health` asks the same
        query (answered from that round when it was)."""
        xids, label_of = self._top(xid_max)
        return (self._xid_query("last_over_time", self._uuid_matcher(xids, label_of), rng), at) if xids else None

    def device_health(self, start: datetime, end: datetime) -> list[DeviceHealth]:
        """Health fields per GPU. Two rounds of independent queries (query_all): which GPUs have anything to
        report (from the recording rules' series when they cover the bucket), then the details for those only."""
        rng, at = window(start, end)
        fields: dict[tuple[str, str], dict] = defaultdict(dict)
        counters = self.HEALTH_COUNTERS
        xid_max, clock_top, remap_failure, *counter_tops = self._health_first_round(start, end)
        for key, v in self._by_device(xid_max).items():
            fields[key].setdefault("xid", set()).add(int(v))
        for key in self._by_device(remap_failure):
            fields[key]["remap_failure"] = True
        details: list[tuple[str, datetime]] = []
        top, label_of = self._top(clock_top)
        if top:
            matcher = self._uuid_matcher(top, label_of)
            details += [
                (f"min by ({DEVICE_BY}) ({_alternatives('min_over_time', CLOCK_EVENT_METRICS, matcher, rng)})", at),
                (f"sum by ({DEVICE_BY}) ({_alternatives('sum_over_time', CLOCK_EVENT_METRICS, matcher, rng)})", at),
                (f"sum by ({DEVICE_BY}) ({_alternatives('count_over_time', CLOCK_EVENT_METRICS, matcher, rng)})",
                 at),
            ]
        tops = [self._top(answer) for answer in counter_tops]
        asked = [(name, scale, t) for (_m, name, scale, _f), (t, label_of) in zip(counters, tops, strict=True) if t]
        details += [(f"min by ({DEVICE_BY}) (min_over_time({metric}{{{self._uuid_matcher(t, label_of)}}}[{rng}]))", at)
                    for (metric, _n, _s, _f), (t, label_of) in zip(counters, tops, strict=True) if t]
        xid_last_query = self._xid_last_query(xid_max, rng, at)
        if xid_last_query is not None:
            details.append(xid_last_query)
        answers = [self._by_device(a) for a in self.query_all(details)]
        if xid_last_query is not None:
            for key, v in answers.pop().items():
                fields[key].setdefault("xid", set()).add(int(v))
        if top:
            low, total, count = answers[:3]
            answers = answers[3:]
            for key, v in top.items():
                if count.get(key):
                    fields[key]["clock"] = (int(low.get(key, v)), int(v), total.get(key, v) / count[key])
        for (name, scale, t), low in zip(asked, answers, strict=True):
            for key, v in t.items():
                increase = v - low.get(key, v)
                if increase > 0:
                    fields[key][name] = increase * scale
        seconds = (end - start).total_seconds()
        return [
            DeviceHealth(
                node=node, uuid=uuid, xid_codes=tuple(sorted(f.get("xid", ()))), clock_events=f.get("clock"),
                power_violation_seconds=min(f.get("power", 0.0), seconds),
                thermal_violation_seconds=min(f.get("thermal", 0.0), seconds),
                uncorrectable_remapped_rows=f.get("remapped", 0.0), row_remap_failure=f.get("remap_failure", False),
                ecc_dbe=f.get("dbe", 0.0),
            )
            for (node, uuid), f in sorted(fields.items())
        ]

    @staticmethod
    def _vanished_queries(start: datetime, end: datetime) -> list[tuple[str, datetime]]:
        """The GPUs with a sample in the hour before the bucket, and those with one in the bucket: `vanished_devices`
        keeps the first that the second lacks (PromQL's `unless`, matching on every label). One query `[2h] unless
        [1h]` at the bucket's end read the bucket's samples twice; two queries, each over its own window, read each
        sample once and answer one label set per GPU each. Counting is cheap; the per-sample timestamps (a subquery)
        are asked for the vanished devices only (usually none): over every GPU of a 10,000-GPU fleet that subquery
        took seconds per bucket (bench/collect.py)."""
        return [(f"count by ({DEVICE_BY}) (count_over_time({FB_USED}[{rng}]))", at)
                for rng, at in (window(start - timedelta(hours=1), start), window(start, end))]

    def vanished_devices(self, start: datetime, end: datetime) -> list[VanishedDevice]:
        rng, at = window(start - timedelta(hours=1), end)
        before, during = self.query_all(self._vanished_queries(start, end))
        present = {frozenset(r["metric"].items()) for r in during}
        label_of: dict[tuple[str, str], str] = {}
        for r in before:
            key = _device(r["metric"])
            if key[1] and frozenset(r["metric"].items()) not in present:
                label_of[key] = "UUID" if r["metric"].get("UUID") else "uuid"
        if not label_of:
            return []
        # When each was last seen, and who the last series named: the pod holding the GPU when it vanished.
        matcher = self._uuid_matcher(label_of, label_of)
        seen = f"max_over_time(timestamp({FB_USED}{{{matcher}}})[{rng}:{HISTORY_STEP_SECONDS}s])"
        by = f"{DEVICE_BY}, namespace, pod, exported_namespace, exported_pod"
        holder: dict[tuple[str, str], tuple[float, str, str]] = {}
        for r in self.query(f"max by ({by}) ({seen})", at):
            v, key, m = _value(r), _device(r["metric"]), r["metric"]
            if v is None or key not in label_of:
                continue
            if self.pod_labels == "exported" or m.get("exported_pod"):
                ns, pod = m.get("exported_namespace", ""), m.get("exported_pod", "")
            else:
                ns, pod = m.get("namespace", ""), m.get("pod", "")
            if key not in holder or (v, pod) > holder[key][:2]:
                holder[key] = (v, pod, ns)
        # A device whose last sample the subquery's steps missed: last seen at the bucket's start at the latest.
        return [VanishedDevice(node, uuid, _ts(holder[(node, uuid)][0] if (node, uuid) in holder
                                              else start.timestamp()),
                               holder.get((node, uuid), (0, "", ""))[2], holder.get((node, uuid), (0, "", ""))[1])
                for (node, uuid) in sorted(label_of)]

    def devices_reporting(self, start: datetime, end: datetime, uuids: Collection[str]) -> frozenset[str]:
        if not uuids:
            return frozenset()
        rng, at = window(start, end)
        found: set[str] = set()
        for label in ("UUID", "uuid"):
            q = f'count by ({label}) (count_over_time({FB_USED}{{{label}=~"{_regex(uuids)}"}}[{rng}]))'
            found |= {r["metric"].get(label, "") for r in self.query(q, at)}
        return frozenset(found & set(uuids))

    def recorded(self, start: datetime, end: datetime) -> dict[str, list[dict]] | None:  # pragma: no cover
        raise NotImplementedError  # PrometheusSource's

    MEMORY_BY = "exported_namespace, exported_pod, namespace, pod, UUID, uuid, GPU_I_ID"

    @classmethod
    def _memory_query(cls, start: datetime, end: datetime) -> tuple[str, datetime]:
        rng, at = window(start, end)
        return (f'max by ({cls.MEMORY_BY}) (avg_over_time({FB_USED}{{exported_pod!=""}}[{rng}])'
                f' or avg_over_time({FB_USED}{{pod!="",exported_pod=""}}[{rng}]))', at)

    def _memory(self, start: datetime, end: datetime) -> list[dict]:  # pragma: no cover (PrometheusSource's)
        raise NotImplementedError

    def pod_memory(self, start: datetime, end: datetime, pods: Collection[str] | None = None) -> list[PodMemory]:
        """Framebuffer in use per pod series of `pods` (every pod: None), from the bucket's one answer for every
        pod (`_memory`): the findings' idle pods and the savings' pods of a bucket read the same series."""
        if pods is not None and not pods:
            return []
        out = []
        for r in self._memory(start, end):
            m, v = r["metric"], _value(r)
            pod = m.get("exported_pod") or m.get("pod") or ""
            ns = m.get("exported_namespace") or m.get("namespace") or ""
            uuid = m.get("UUID") or m.get("uuid") or ""
            if v is None or not (pod and ns and uuid) or (pods is not None and pod not in pods):
                continue
            out.append(PodMemory(ns, pod, uuid, m.get("GPU_I_ID", ""), v))
        return out

    def pod_nodes(self, start: datetime, end: datetime, pods: Collection[str]) -> dict[str, str]:
        if not pods:
            return {}
        rng, at = window(start, end)
        names = f'{{pod=~"{_regex(pods)}"}}' if len(pods) <= MAX_REGEX_NAMES else ""
        out: dict[str, str] = {}
        for r in self.query(f"max by (pod, node) (max_over_time(kube_pod_info{names}[{rng}]))", at):
            pod, node = r["metric"].get("pod", ""), r["metric"].get("node", "")
            if pod in pods and node:
                out.setdefault(pod, node)
        return out

    def unheld_activity(self, start: datetime, end: datetime, *, above: float) -> list[DeviceActivity]:
        rng, at = window(start, end)
        signal = default_signal()
        metric = self.metrics[signal]
        scale = SIGNAL_SCALE.get(signal, 1.0)
        if self.pod_labels is None:  # which label names the pod here: ask once (a held series with exported_pod?)
            exported = self.query(f'count(last_over_time({metric}{{exported_pod!=""}}[{rng}]))', at)
            self.pod_labels = "exported" if exported else "plain"
        # With exported_* labels the plain `pod` label names the exporter itself: a series without exported_pod
        # has no holder. Otherwise a series without `pod` has none.
        matchers = 'exported_pod=""' if self.pod_labels == "exported" else 'pod="",exported_pod=""'
        by = f"{DEVICE_BY}, GPU_I_ID, GPU_I_PROFILE"
        q = f"max by ({by}) (avg_over_time({metric}{{{matchers}}}[{rng}])) > {above / scale:g}"
        out = []
        for r in self.query(q, at):
            v = _value(r)
            node, uuid = _device(r["metric"])
            if v is None or not uuid:
                continue
            ratio = v * scale
            if ratio > 1.0 + 1e-6:
                continue  # out of range: the ledger reports such values, findings do not count them
            out.append(DeviceActivity(node, uuid, r["metric"].get("GPU_I_ID", ""),
                                      r["metric"].get("GPU_I_PROFILE", ""), ratio))
        return out


@dataclass(frozen=True)
class _Ahead:
    """A bucket's round of queries running ahead (`PrometheusSource.prefetch_ahead`), and the thread that started it:
    the one that waits for it."""

    round: Future[None]
    owner: int


class PrometheusSource(_FindingQueries):
    """Reads one cluster's Prometheus."""

    def __init__(self, cluster: Cluster):
        if not cluster.prometheus_url:
            raise PrometheusError(f"cluster {cluster.name} has no Prometheus URL")
        headers: dict[str, str] = {}
        try:
            auth = cluster.prometheus_auth
        except (OSError, SecretError) as exc:
            raise PrometheusError(f"cluster {cluster.name}: Prometheus credential unreadable: {exc}") from exc
        if auth and ":" in auth:
            headers["Authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()
        elif auth:
            headers["Authorization"] = f"Bearer {auth}"
        self.cluster = cluster
        self.metrics = {**DEFAULT_METRICS, **(cluster.metric_names or {})}
        self.prom = PrometheusConnect(
            url=cluster.prometheus_endpoint,
            headers=headers or None,
            disable_ssl=not cluster.prometheus_verify_tls,
            timeout=settings.GPUFINOPS_PROMETHEUS_TIMEOUT,
            # One quick retry for a dropped connection; real recovery is the bucket's own retry state.
            retry=Retry(total=1, backoff_factor=0.2, status_forcelist=[502, 503, 504]),
        )
        self.queries = 0
        self.samples = 0
        self._counting = threading.Lock()  # query_all's threads count too
        self.warnings: list[str] = []
        # How series name their pod: "exported" (Prometheus Operator, honorLabels false: exported_pod) or
        # "plain" (pod); learnt from the activity series, None until known.
        self.pod_labels: str | None = None
        # The last bucket's recorded series by signal (None: read the raw series), shared by the ledger's
        # activity and the findings' framebuffer.
        self._recorded: tuple[tuple[datetime, datetime], dict[str, list[dict]] | None] | None = None
        # Whether the recording rules cover the last bucket (their heartbeat at both edges), asked with `recorded`.
        self._covered: tuple[tuple[datetime, datetime], bool] | None = None
        self._memory_answer: tuple[tuple[datetime, datetime], list[dict]] | None = None
        # Answers asked ahead for one bucket (`prefetch`), each handed out once by `query`.
        self._prefetched: dict[tuple[str, datetime], list[dict[str, Any]]] = {}
        self._prefetched_for: tuple[datetime, datetime] | None = None
        # A bucket's round started ahead in a thread of its own (`prefetch_ahead`) while the collector reads
        # Kubernetes; joined by the collector's thread before it uses the source (`_join_ahead`).
        self._ahead: _Ahead | None = None
        self._stopping = threading.Event()  # `stop_ahead`: the round's queries not yet sent are not sent

    # ---- plumbing ----
    def query(self, promql: str, at: datetime) -> list[dict[str, Any]]:
        """The answer to one instant query: prefetched for this bucket (`prefetch`), else asked now."""
        self._join_ahead()
        with self._counting:
            answer = self._prefetched.pop((promql, at), None)
        return self.ask(promql, at) if answer is None else answer

    def ask(self, promql: str, at: datetime) -> list[dict[str, Any]]:
        """Ask Prometheus one instant query."""
        with self._counting:
            self.queries += 1
        try:
            result = self._instant(promql, at)
        except Exception as exc:  # connection errors, HTTP errors, JSON errors: the bucket fails
            # requests quotes the URL's path and query in its messages: scrubbed before truncating (a cut secret is
            # still a secret), and not chained (a logged traceback would print the original).
            said = self.cluster.scrub(str(exc))
            raise PrometheusError(f"Prometheus query failed ({type(exc).__name__}): {said[:300]}") from None
        if not isinstance(result, list) or any(not isinstance(r, dict) or "metric" not in r for r in result):
            raise PrometheusError(f"malformed Prometheus answer for {promql[:80]!r}")
        with self._counting:
            self.samples += len(result)
        return result

    def _instant(self, promql: str, at: datetime) -> Any:
        """`PrometheusConnect.custom_query`'s request (its session, retries, headers and errors), its answer decoded
        by orjson with the garbage collector paused (`apps.common.decoding`): the standard decoder took ~0.6 s of a
        10,000-GPU bucket's answers (bench/README.md)."""
        prom = self.prom
        response = prom._session.request(
            method="GET", url=f"{prom.url}/api/v1/query", params={"query": promql, "time": at.timestamp()},
            verify=prom._session.verify, headers=prom.headers, auth=prom.auth, cert=prom._session.cert,
            timeout=settings.GPUFINOPS_PROMETHEUS_TIMEOUT,
        )
        if response.status_code != 200:
            raise PrometheusApiClientException(f"HTTP Status Code {response.status_code} ({response.content!r})")
        return decoding.loads(response.content)["data"]["result"]

    def status(self, name: str) -> dict[str, Any]:
        """`/api/v1/status/<name>` (`buildinfo`, `flags`): the preflight's view of the server itself."""
        try:
            response = self.prom._session.get(f"{self.prom.url}/api/v1/status/{name}", headers=self.prom.headers,
                                              timeout=settings.GPUFINOPS_PROMETHEUS_TIMEOUT)
            response.raise_for_status()
            body = response.json()
        except Exception as exc:  # connection, HTTP and JSON errors alike
            said = self.cluster.scrub(str(exc))
            raise PrometheusError(f"Prometheus status/{name} failed ({type(exc).__name__}): {said[:300]}") from None
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, dict):
            raise PrometheusError(f"malformed Prometheus answer for status/{name}")
        return data

    def prefetch(self, start: datetime, end: datetime) -> None:
        """Ask, in one round (up to GPUFINOPS_PROMETHEUS_PARALLEL at once), every query of the bucket `[start, end)`
        that depends on no other answer: the ledger's kube-state-metrics history, edge times and activity (the
        recorded series' round first: whether the raw signals are needed), and the findings' first health round,
        vanished GPUs and pods' framebuffer. Asked one method after another they made a dozen rounds, each waiting
        for the last answer of the one before. The same queries and answers: `query` hands each out once. A query
        that fails here is not kept: asked again where it is needed, it fails there (a findings query never fails
        the ledger). Once per bucket; the ledger's methods call it. When `prefetch_ahead` started the round, this
        waits for it; had it failed, the round is asked again here, so a failure surfaces where and as it did."""
        self._join_ahead()
        if self._prefetched_for == (start, end):
            return
        self._ask_round(start, end)

    def prefetch_ahead(self, start: datetime, end: datetime) -> None:
        """Start `prefetch(start, end)` in a thread and return: the round depends on nothing the Kubernetes read
        shows, so Prometheus can work on it while the collector reads and records the snapshot. The calling
        thread's next use of this source waits for it (`_join_ahead`); `stop_ahead` ends it early."""
        self._join_ahead()
        self._stopping.clear()
        pool = ThreadPoolExecutor(1, thread_name_prefix="prometheus-ahead")
        try:
            self._ahead = _Ahead(pool.submit(self._ask_round, start, end), threading.get_ident())
        finally:
            pool.shutdown(wait=False)  # the thread ends with the round

    def stop_ahead(self) -> None:
        """End a round started by `prefetch_ahead` that nothing will use (the Kubernetes read failed): its queries
        not yet sent are not sent, and this returns once the ones in flight have answered (each bounded by
        GPUFINOPS_PROMETHEUS_TIMEOUT), so no thread outlives the collection."""
        self._stopping.set()
        try:
            self._join_ahead()
        finally:
            self._stopping.clear()

    def _join_ahead(self) -> None:
        """Wait for the round `prefetch_ahead` started, when called from the thread that started it (the round's own
        threads go on). A round that raised is forgotten whole: `prefetch` asks it again in the caller's thread,
        where its error surfaces exactly as without the early start."""
        ahead = self._ahead
        if ahead is None or ahead.owner != threading.get_ident():
            return
        self._ahead = None
        try:
            ahead.round.result()
        except Exception:  # asked again by `prefetch`, which raises it in the ledger's thread
            with self._counting:
                self._prefetched, self._prefetched_for = {}, None
        if self._stopping.is_set():  # the round was cut short: its answers are incomplete, not kept
            with self._counting:
                self._prefetched, self._prefetched_for = {}, None

    def _ask_round(self, start: datetime, end: datetime) -> None:
        """`prefetch`'s round itself (in the caller's thread, or ahead in one of its own)."""
        self._prefetched_for = (start, end)
        with self._counting:
            self._prefetched = {}
        rng, at = window(start, end)
        rules = self.rules_cover(start, end)
        health = self._health_recorded_queries(start, end) if rules else self._health_queries(start, end)
        queries = [
            *self._pod_history_queries(start, end),
            self._seen_instant("kube_pod_start_time", "uid", "max", start, end),
            self._namespace_labels_query(start, end),
            *self._owner_queries(start, end),
            *self._node_history_queries(start, end),
            self._seen_instant("kube_node_labels", "node", "min", start, end),
            self._seen_instant("kube_node_labels", "node", "max", start, end),
            *([] if self.recorded(start, end) is not None
              else [*((self._signal_query(s, rng), at) for s in SIGNALS), self._memory_query(start, end)]),
            *health,
            *self._vanished_queries(start, end),
        ]
        # The last XID codes are asked right after the highest ones (health[0], raw or recorded round alike), by the
        # same thread while the round's other queries run: device_health would otherwise ask them in a round of its
        # own.
        then: dict[tuple[str, datetime], Callable[[list[dict]], tuple[str, datetime] | None]] = {
            health[0]: lambda xid_max: self._xid_last_query(xid_max, rng, at)}
        for query, answer in zip(queries, self._ask_all(queries, then), strict=True):
            if answer is not None:
                with self._counting:
                    self._prefetched[query] = answer

    def _ask_all(self, queries: Sequence[tuple[str, datetime]],
                 then: Mapping[tuple[str, datetime], Callable[[list[dict]], tuple[str, datetime] | None]]
                 ) -> list[list[dict[str, Any]] | None]:
        """`ask` each query, side by side as query_all does; a failed one is None. A query in `then` is followed, in
        its thread, by the query its answer names (if any), kept with the round's answers (dropped if it fails)."""
        def ask(q: tuple[str, datetime]) -> list[dict[str, Any]] | None:
            if self._stopping.is_set():
                return None
            try:
                answer = self.ask(*q)
            except PrometheusError:
                return None
            follow = then[q](answer) if q in then else None
            if follow is not None and not self._stopping.is_set():
                try:
                    followed = self.ask(*follow)
                except PrometheusError:
                    return answer
                with self._counting:
                    self._prefetched[follow] = followed
            return answer

        workers = min(settings.GPUFINOPS_PROMETHEUS_PARALLEL, len(queries))
        if workers <= 1:
            return [ask(q) for q in queries]
        with ThreadPoolExecutor(workers, thread_name_prefix="prometheus") as pool:
            return list(pool.map(ask, queries))

    def query_all(self, queries: Sequence[tuple[str, datetime]]) -> list[list[dict[str, Any]]]:
        """The answers to independent queries, in their order, up to GPUFINOPS_PROMETHEUS_PARALLEL in flight at
        once: a bucket mostly waits on Prometheus, which answers several queries side by side. The first
        failure is raised, as `query` raises it."""
        self._join_ahead()
        workers = min(settings.GPUFINOPS_PROMETHEUS_PARALLEL, len(queries))
        if workers <= 1:
            return [self.query(promql, at) for promql, at in queries]
        with ThreadPoolExecutor(workers, thread_name_prefix="prometheus") as pool:
            return list(pool.map(lambda q: self.query(*q), queries))

    # ---- DCGM activity ----
    def _signal_query(self, signal: str, rng: str) -> str:
        metric = self.metrics[signal]
        # Prometheus Operator with honorLabels=false renames the exporter's pod labels to exported_*. Series told apart
        # only by labels not read (two scrape jobs of one exporter) give their highest average, as the recorded
        # series (the highest value at each scrape) do, where every label kept one of them, whichever came last.
        return (
            f'max by ({SIGNAL_BY}) (avg_over_time({metric}{{exported_pod!=""}}[{rng}]) or '
            f'avg_over_time({metric}{{pod!="",exported_pod=""}}[{rng}]))'
        )

    def _signal_series(self, signal: str, answer: list[dict[str, Any]]) -> dict[tuple, float]:
        scale = SIGNAL_SCALE.get(signal, 1.0)
        out: dict[tuple, float] = {}
        for r in answer:
            m = r["metric"]
            pod = m.get("exported_pod") or m.get("pod") or ""
            ns = m.get("exported_namespace") or m.get("namespace") or ""
            uuid = m.get("UUID") or m.get("uuid") or m.get("gpu_uuid") or ""
            v = _value(r)
            if not pod or not ns or not uuid:
                log.warning("cluster %s: DCGM series without pod identity or UUID skipped: %s", self.cluster, m)
                continue
            if v is None:
                self.warnings.append(f"{signal}: non-numeric value for {ns}/{pod} {uuid}")
                continue
            ratio = v * scale
            if ratio < -1e-9 or ratio > 1.0 + 1e-6:
                self.warnings.append(f"{signal}: value {v} out of range for {ns}/{pod} {uuid}; not counted")
                continue
            key = (ns, pod, uuid, m.get("GPU_I_ID", ""), m.get("GPU_I_PROFILE", ""), m.get("vgpu", ""),
                   m.get("dra_mig_device_uuid", ""))
            out[key] = ratio
            if self.pod_labels is None:
                self.pod_labels = "exported" if m.get("exported_pod") else "plain"
        return out

    def activity(self, start: datetime, end: datetime) -> list[SeriesFact]:
        """Every signal's series, each kept under its own name: a signal the exporter lacks stays missing
        (its hours unmeasured), never filled with another signal's values (ledger.md "Activity")."""
        self.prefetch(start, end)
        rng, at = window(start, end)
        recorded = self.recorded(start, end)
        if recorded is not None:
            answers = [recorded.get(s, []) for s in SIGNALS]
        else:
            answers = self.query_all([(self._signal_query(s, rng), at) for s in SIGNALS])
        per_signal = {s: self._signal_series(s, answer) for s, answer in zip(SIGNALS, answers, strict=True)}
        keys = set().union(*per_signal.values())
        facts = []
        for key in sorted(keys):
            values = {s: per_signal[s][key] for s in SIGNALS if key in per_signal[s]}
            facts.append(SeriesFact(key[0], key[1], key[2], key[3], key[4], values, replica=key[5],
                                    device_uuid=key[6]))
        return facts

    def recorded(self, start: datetime, end: datetime) -> dict[str, list[dict]] | None:
        """The recorded series of deploy/monitoring/gpufinops-recording.yaml averaged over `[start, end)`, by their
        `signal` label; None when they do not cover the bucket (absent, started or stopped within it), when
        GPUFINOPS_PROMETHEUS_RECORDING_RULES is off, or when the cluster renames a metric the rules read: the
        caller then reads the raw series. One round of three queries (both edges and the series), asked once per
        bucket: the ledger's activity and the findings' framebuffer share the answer.

        Each recorded series is its raw series (`max by` the labels read here: one series per pod, GPU and
        signal), evaluated at the scrape interval, so its average over the bucket is the raw series' average.
        """
        self._join_ahead()
        if self._recorded is not None and self._recorded[0] == (start, end):
            return self._recorded[1]
        answer: dict[str, list[dict]] | None = None
        covered = False
        if settings.GPUFINOPS_PROMETHEUS_RECORDING_RULES:
            rng, at = window(start, end)
            edge, edge_at = window(end - RECORDED_EDGE, end)
            beats = f"count_over_time({RECORDED_HEARTBEAT}[{edge}])"
            # A renamed signal metric: the activity is read raw, the health fields (fixed names) still recorded.
            signals = all(self.metrics[s] == DEFAULT_METRICS[s] for s in SIGNALS)
            first, last, *series = self.query_all([
                (beats, min(start + RECORDED_EDGE, end) - timedelta(milliseconds=1)), (beats, edge_at),
                *([(f"avg_over_time({RECORDED}[{rng}])", at)] if signals else []),
            ])
            covered = bool(first and last)
            if covered and signals:
                answer = {}
                for r in series[0]:
                    answer.setdefault(r["metric"].get("signal", ""), []).append(r)
        self._recorded = ((start, end), answer)
        self._covered = ((start, end), covered)
        return answer

    def rules_cover(self, start: datetime, end: datetime) -> bool:
        """Whether the recording rules' series cover `[start, end)` (asked with `recorded`, once per bucket): the
        findings' health fields then read HEALTH_RECORDED."""
        self.recorded(start, end)
        return self._covered is not None and self._covered == ((start, end), True)

    def _memory(self, start: datetime, end: datetime) -> list[dict]:
        """`max by (MEMORY_BY)` of every pod series' framebuffer averaged over the bucket: from the recorded series
        when they cover it, else one query; kept for the bucket (the findings' idle pods and the savings' pods
        both read it: one query, where each asked its own)."""
        if self._memory_answer is not None and self._memory_answer[0] == (start, end):
            return self._memory_answer[1]
        recorded = self.recorded(start, end)
        if recorded is not None:  # already read: `max by` done here
            answer = _max_by(self.MEMORY_BY, recorded.get("fb_used", []))
        else:
            answer = self.query(*self._memory_query(start, end))
        self._memory_answer = ((start, end), answer)
        return answer

    def device_activity(self, start: datetime, end: datetime, uuids: Collection[str]) -> dict[str, dict[str, float]]:
        """Per physical GPU of `uuids`, each signal time-averaged over `[start, end)` from its series without a
        pod (whole-GPU series: no GPU instance). What HAMi tenants are measured by: dcgm-exporter names none."""
        if not uuids:
            return {}
        rng, at = window(start, end)
        if self.pod_labels is None:
            exported = self.query(f'count(last_over_time({self.metrics[SIGNALS[0]]}{{exported_pod!=""}}[{rng}]))', at)
            self.pod_labels = "exported" if exported else "plain"
        unheld = 'exported_pod=""' if self.pod_labels == "exported" else 'pod="",exported_pod=""'
        names = _regex(uuids)
        queries = [(f'max by (UUID) (avg_over_time({self.metrics[s]}{{{unheld},GPU_I_ID="",UUID=~"{names}"}}'
                    f'[{rng}]))', at) for s in SIGNALS]
        out: dict[str, dict[str, float]] = {}
        for signal, answer in zip(SIGNALS, self.query_all(queries), strict=True):
            scale = SIGNAL_SCALE.get(signal, 1.0)
            for r in answer:
                v, uuid = _value(r), r["metric"].get("UUID", "")
                if v is None or not uuid or not (-1e-9 <= v * scale <= 1.0 + 1e-6):
                    continue
                out.setdefault(uuid, {})[signal] = v * scale
        return out

    def has_dcgm(self, start: datetime, end: datetime) -> bool:
        rng, at = window(start, end)
        metrics = "|".join(re.escape(self.metrics[s]) for s in SIGNALS)
        # last_over_time keeps each series' name, so several signal metrics never collapse into one label set
        # (count_over_time drops the name and real Prometheus then refuses the answer with a 422).
        return bool(self.query(f'count(last_over_time({{__name__=~"{metrics}"}}[{rng}]))', at))

    # ---- kube-state-metrics history ----
    @staticmethod
    def _seen_instant(metric: str, by: str, fn: str, start: datetime, end: datetime) -> tuple[str, datetime]:
        """`_seen`'s instant query at the bucket's edge."""
        _rng, at = window(start, end)
        return f"{fn} by ({by}) (timestamp({metric}))", at if fn == "max" else start

    def _seen(self, metric: str, by: str, fn: str, start: datetime, end: datetime,
              names: Collection[str]) -> dict[str, float]:
        """When the `metric` series of each of `names` (values of label `by`) were first (`fn` "min") or last
        ("max") seen in the bucket: the timestamp of a sample, as the subquery
        `fn by (by) (fn_over_time(timestamp(metric)[window:step]))` answers.

        That subquery evaluates every series at every step: 0.9-1.6 s a query at 10,000 GPUs. Most series are
        present at the bucket's edge, so one instant `timestamp()` query there answers them: for "max" at the
        bucket's end, their last sample (what the subquery gives); for "min" at its start, their sample at or
        before the start (they were there from the start: the ledger reads any first sighting within
        EDGE_TOLERANCE of the start as the start). The subquery then runs only for the rest (series that
        appeared or vanished within the bucket), named in a matcher, MAX_REGEX_NAMES at a time; with more
        than four such batches it runs unrestricted once.
        """
        rng, at = window(start, end)
        out: dict[str, float] = {}
        for r in self.query(*self._seen_instant(metric, by, fn, start, end)):
            name, v = r["metric"].get(by, ""), _value(r)
            if name in names and v:
                out[name] = v
        rest = sorted(set(names) - set(out))
        if not rest:
            return out
        batches = [rest[i:i + MAX_REGEX_NAMES] for i in range(0, len(rest), MAX_REGEX_NAMES)]
        selectors = ([f'{metric}{{{by}=~"{_regex(batch)}"}}' for batch in batches] if len(batches) <= 4
                     else [metric])
        for selector in selectors:
            q = f"{fn} by ({by}) ({fn}_over_time(timestamp({selector})[{rng}:{HISTORY_STEP_SECONDS}s]))"
            for r in self.query(q, at):
                name, v = r["metric"].get(by, ""), _value(r)
                if name in names and name not in out and v:
                    out[name] = v
        return out

    @staticmethod
    def _pod_history_queries(start: datetime, end: datetime) -> list[tuple[str, datetime]]:
        """pod_history's queries: the pods' start times first, then what is read of those pods."""
        rng, at = window(start, end)
        requests = ("kube_pod_container_resource_requests", "kube_pod_init_container_resource_requests")
        # `max by` the labels read below: kube-state-metrics adds a dozen more per series (instance, job, host_ip,
        # pod_ip, created_by_*, …) that Prometheus would encode and this process decode, ~4,000 series a query at
        # 10,000 GPUs. Series told apart only by those (two scrapes of one kube-state-metrics) carry equal values.
        return [
            (f"max_over_time(kube_pod_start_time[{rng}])", at),
            (f"max by (uid) (max_over_time(kube_pod_completion_time[{rng}]))", at),
            *((f'max by (uid, container, resource, node) (max_over_time({metric}{{resource=~"nvidia_com_.*"}}'
               f'[{rng}]))', at) for metric in requests),
            (f"max_over_time(kube_pod_labels[{rng}])", at),
            (f"max by (uid, node) (max_over_time(kube_pod_info[{rng}]))", at),
            (f'max by (uid, owner_kind, owner_name) (max_over_time(kube_pod_owner{{owner_is_controller="true"}}'
             f'[{rng}]))', at),
        ]

    def pod_history(self, start: datetime, end: datetime, label_keys: Sequence[str]) -> list[PodHistory]:
        self.prefetch(start, end)
        starts_query, *rest = self._pod_history_queries(start, end)
        starts = self.query(*starts_query)
        if not starts:
            return []
        completions, *request_answers, label_answer, info, owner_answer = self.query_all(rest)
        done: dict[str, float] = {}
        for r in completions:
            v = _value(r)
            if v:
                done[r["metric"].get("uid", "")] = v
        seen = self._seen("kube_pod_start_time", "uid", "max", start, end,
                          {r["metric"].get("uid", "") for r in starts} - {""})
        app: dict[str, dict[str, dict[str, float]]] = {}
        init: dict[str, dict[str, dict[str, float]]] = {}
        nodes: dict[str, str] = {}
        for answer, target in zip(request_answers, (app, init), strict=True):
            for r in answer:
                m, v = r["metric"], _value(r)
                res = ksm_resource(m.get("resource", ""))
                if v is None or res is None:
                    continue
                uid = m.get("uid", "")
                target.setdefault(uid, {}).setdefault(m.get("container", ""), {})[res] = v
                if m.get("node"):
                    nodes[uid] = m["node"]
        labels: dict[str, dict[str, str]] = {}
        for r in label_answer:
            labels[r["metric"].get("uid", "")] = unsanitized(r["metric"], label_keys)
        for r in info:
            m = r["metric"]
            if m.get("node") and m.get("uid"):
                nodes.setdefault(m["uid"], m["node"])
        owners = {}
        for r in owner_answer:
            m = r["metric"]
            if m.get("uid") and m.get("owner_kind") and m.get("owner_name") not in (None, "", "<none>"):
                owners[m["uid"]] = (m["owner_kind"], m["owner_name"])
        pods = []
        for r in starts:
            m, v = r["metric"], _value(r)
            uid = m.get("uid", "")
            if not uid or (uid not in app and uid not in init):
                continue
            pods.append(
                PodHistory(
                    uid=uid,
                    namespace=m.get("namespace", ""),
                    name=m.get("pod", ""),
                    node=nodes.get(uid, ""),
                    started=_ts(v) if v else None,
                    finished=_ts(done[uid]) if uid in done else None,
                    last_seen=_ts(seen[uid]) if uid in seen else None,
                    labels=labels.get(uid, {}),
                    app_requests=app.get(uid, {}),
                    init_requests=init.get(uid, {}),
                    owner=owners.get(uid),
                )
            )
        return pods

    OWNERS = (("kube_replicaset_owner", "ReplicaSet", "replicaset"), ("kube_job_owner", "Job", "job_name"))

    @classmethod
    def _owner_queries(cls, start: datetime, end: datetime) -> list[tuple[str, datetime]]:
        rng, at = window(start, end)
        return [(f'max by (namespace, {name}, owner_kind, owner_name) (max_over_time({metric}'
                 f'{{owner_is_controller="true"}}[{rng}]))', at) for metric, _k, name in cls.OWNERS]

    def owner_history(self, start: datetime, end: datetime) -> dict[tuple[str, str, str], tuple[str, str]]:
        """Controllers of ReplicaSets and Jobs (kube_replicaset_owner, kube_job_owner) seen in the bucket."""
        self.prefetch(start, end)
        out: dict[tuple[str, str, str], tuple[str, str]] = {}
        answers = self.query_all(self._owner_queries(start, end))
        for (_metric, kind, name_label), answer in zip(self.OWNERS, answers, strict=True):
            for r in answer:
                m = r["metric"]
                if m.get(name_label) and m.get("owner_kind") and m.get("owner_name") not in (None, "", "<none>"):
                    out[(m.get("namespace", ""), kind, m[name_label])] = (m["owner_kind"], m["owner_name"])
        return out

    @staticmethod
    def _namespace_labels_query(start: datetime, end: datetime) -> tuple[str, datetime]:
        rng, at = window(start, end)
        return f"max_over_time(kube_namespace_labels[{rng}])", at

    def namespace_labels(
        self, start: datetime, end: datetime, label_keys: Sequence[str]
    ) -> dict[str, dict[str, str]]:
        self.prefetch(start, end)
        out: dict[str, dict[str, str]] = {}
        for r in self.query(*self._namespace_labels_query(start, end)):
            m = r["metric"]
            out[m.get("namespace", "")] = unsanitized(m, label_keys)
        return out

    @staticmethod
    def _node_history_queries(start: datetime, end: datetime) -> list[tuple[str, datetime]]:
        """node_history's queries: the nodes' labels first, then what is read of those nodes."""
        rng, at = window(start, end)
        resources = ("kube_node_status_allocatable", "kube_node_status_capacity")
        return [
            (f"max_over_time(kube_node_labels[{rng}])", at),
            *((f'max by (node, resource) (max_over_time({metric}{{resource=~"nvidia_com_.*"}}[{rng}]))', at)
              for metric in resources),
            (f"max_over_time(kube_node_spec_unschedulable[{rng}]) > 0", at),
            (f'min_over_time(kube_node_status_condition{{condition="Ready",status="true"}}[{rng}]) < 1', at),
        ]

    def node_history(self, start: datetime, end: datetime, label_keys: Sequence[str]) -> list[NodeHistory]:
        self.prefetch(start, end)
        labels_query, *rest = self._node_history_queries(start, end)
        labels = {r["metric"].get("node", ""): r["metric"] for r in self.query(*labels_query)}
        if not labels:
            return []
        *resource_answers, unschedulable, unready = self.query_all(rest)
        alloc: dict[str, dict[str, float]] = {}
        cap: dict[str, dict[str, float]] = {}
        for answer, target in zip(resource_answers, (alloc, cap), strict=True):
            for r in answer:
                res, v = ksm_resource(r["metric"].get("resource", "")), _value(r)
                if res and v is not None:
                    target.setdefault(r["metric"].get("node", ""), {})[res] = v
        cordoned = {r["metric"].get("node", "") for r in unschedulable}
        not_ready = {r["metric"].get("node", "") for r in unready}
        first = self._seen("kube_node_labels", "node", "min", start, end, set(labels) - {""})
        last = self._seen("kube_node_labels", "node", "max", start, end, set(labels) - {""})
        nodes = []
        for name, m in labels.items():
            nodes.append(
                NodeHistory(
                    name=name,
                    labels=unsanitized(m, label_keys),
                    allocatable=alloc.get(name, {}),
                    capacity=cap.get(name, {}),
                    unschedulable=name in cordoned,
                    ready=name not in not_ready,
                    first_seen=_ts(first.get(name, start.timestamp())),
                    last_seen=_ts(last.get(name, end.timestamp())),
                )
            )
        return nodes

