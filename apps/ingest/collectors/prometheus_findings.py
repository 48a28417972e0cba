"""The findings' queries of the Prometheus collector (`FindingQueries`, mixed into `PrometheusSource`): device health,
vanished GPUs, pod memory, GPUs reporting, unheld activity. Each is one instant query at the bucket's end aggregated
per GPU or pod series; names and helpers come from `promql.py`."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta

from apps.ingest.collectors.promql import (
    CLOCK_EVENT_CANDIDATE,
    CLOCK_EVENT_METRICS,
    DEVICE_BY,
    ECC_DBE,
    FB_USED,
    HEALTH_RECORDED,
    MAX_REGEX_NAMES,
    POWER_VIOLATION,
    ROW_REMAP_FAILURE,
    THERMAL_VIOLATION,
    UNCORRECTABLE_REMAPPED_ROWS,
    XID_METRICS,
    alternatives,
    device_of,
    regex_of,
    sample_time,
    sample_value,
    window,
)
from apps.usage.activity import SIGNAL_SCALE, default_signal
from apps.usage.sources import (
    HISTORY_STEP_SECONDS,
    DeviceActivity,
    DeviceHealth,
    PodMemory,
    VanishedDevice,
)

log = logging.getLogger(__name__)




class FindingQueries:
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
            v = sample_value(r)
            node, uuid = device_of(r["metric"])
            if v is not None and uuid:
                out[(node, uuid)] = v
        return out

    @staticmethod
    def _top(answer: list[dict]) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], str]]:
        """Per GPU: the value, and which label spells its UUID (for a matcher naming those GPUs)."""
        label_of: dict[tuple[str, str], str] = {}
        top: dict[tuple[str, str], float] = {}
        for r in answer:
            v, key = sample_value(r), device_of(r["metric"])
            if v is not None and key[1]:
                top[key] = v
                label_of[key] = "UUID" if r["metric"].get("UUID") else "uuid"
        return top, label_of

    def _uuid_matcher(self, devices: Collection[tuple[str, str]], label_of: Mapping[tuple[str, str], str]) -> str:
        """A matcher restricting a query to these GPUs, or "" (unrestricted) when too many or mixed labels."""
        labels = {label_of.get(d, "UUID") for d in devices}
        if len(devices) > MAX_REGEX_NAMES or len(labels) != 1:
            return ""
        return f'{labels.pop()}=~"{regex_of({u for _n, u in devices})}"'

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
        return f"max by ({DEVICE_BY}) ({alternatives(fn, XID_METRICS, matcher, rng)}) > 0"

    @classmethod
    def _health_queries(cls, start: datetime, end: datetime) -> list[tuple[str, datetime]]:
        """device_health's first round from the raw series: which GPUs have anything to report. The last XID code is
        asked with the details, for the GPUs with a code only (a last code above 0 is a code seen, so the GPUs with
        one are among those): asked of every GPU here, it read every XID series a second time."""
        rng, at = window(start, end)
        clocks = f"max by ({DEVICE_BY}) ({alternatives('max_over_time', CLOCK_EVENT_METRICS, '', rng)})"
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
        return [(FindingQueries._xid_query("max_over_time", "", rng), at),
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
                (f"min by ({DEVICE_BY}) ({alternatives('min_over_time', CLOCK_EVENT_METRICS, matcher, rng)})", at),
                (f"sum by ({DEVICE_BY}) ({alternatives('sum_over_time', CLOCK_EVENT_METRICS, matcher, rng)})", at),
                (f"sum by ({DEVICE_BY}) ({alternatives('count_over_time', CLOCK_EVENT_METRICS, matcher, rng)})",
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
            key = device_of(r["metric"])
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
            v, key, m = sample_value(r), device_of(r["metric"]), r["metric"]
            if v is None or key not in label_of:
                continue
            if self.pod_labels == "exported" or m.get("exported_pod"):
                ns, pod = m.get("exported_namespace", ""), m.get("exported_pod", "")
            else:
                ns, pod = m.get("namespace", ""), m.get("pod", "")
            if key not in holder or (v, pod) > holder[key][:2]:
                holder[key] = (v, pod, ns)
        # A device whose last sample the subquery's steps missed: last seen at the bucket's start at the latest.
        missed = (start.timestamp(), "", "")
        out = []
        for node, uuid in sorted(label_of):
            last, pod, ns = holder.get((node, uuid), missed)
            out.append(VanishedDevice(node, uuid, sample_time(last), ns, pod))
        return out

    def devices_reporting(self, start: datetime, end: datetime, uuids: Collection[str]) -> frozenset[str]:
        if not uuids:
            return frozenset()
        rng, at = window(start, end)
        found: set[str] = set()
        for label in ("UUID", "uuid"):
            q = f'count by ({label}) (count_over_time({FB_USED}{{{label}=~"{regex_of(uuids)}"}}[{rng}]))'
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
            m, v = r["metric"], sample_value(r)
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
        names = f'{{pod=~"{regex_of(pods)}"}}' if len(pods) <= MAX_REGEX_NAMES else ""
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
            v = sample_value(r)
            node, uuid = device_of(r["metric"])
            if v is None or not uuid:
                continue
            ratio = v * scale
            if ratio > 1.0 + 1e-6:
                continue  # out of range: the ledger reports such values, findings do not count them
            out.append(DeviceActivity(node, uuid, r["metric"].get("GPU_I_ID", ""),
                                      r["metric"].get("GPU_I_PROFILE", ""), ratio))
        return out
