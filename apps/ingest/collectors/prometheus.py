"""Prometheus collector: instant queries at a bucket's end with *_over_time, so PromQL aggregates
and no raw samples stream into Python. Implements the ledger's `MetricsSource`.

Reads two families: DCGM activity per device series carrying a pod identity, and the
kube-state-metrics history used to rebuild allocations for hours the Kubernetes collector missed.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry

from apps.common import decoding
from apps.common.secrets import SecretError
from apps.ingest.collectors.prometheus_findings import FindingQueries
from apps.ingest.collectors.promql import (
    MAX_REGEX_NAMES,
    RECORDED,
    RECORDED_EDGE,
    RECORDED_HEARTBEAT,
    SIGNAL_BY,
    PrometheusError,
    ksm_resource,
    max_by,
    regex_of,
    sample_time,
    sample_value,
    unsanitized,
    window,
)
from apps.inventory.models import Cluster
from apps.usage.activity import DEFAULT_METRICS, SIGNAL_SCALE, SIGNALS
from apps.usage.ledger import SeriesFact
from apps.usage.sources import (
    HISTORY_STEP_SECONDS,
    NodeHistory,
    PodHistory,
)

log = logging.getLogger(__name__)




@dataclass(frozen=True)
class _Ahead:
    """A bucket's round of queries running ahead (`PrometheusSource.prefetch_ahead`), the thread that started it (the
    one that waits for it), and whether its queries are known (`planned`: True once they are, their answers then
    waited for one by one; False when the round raised before)."""

    round: Future[None]
    owner: int
    planned: Future[bool]


class PrometheusSource(FindingQueries):
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
        # Answers asked ahead for one bucket (`prefetch`), each handed out once by `query`: a future per query, resolved
        # when its answer is in (None: failed or not sent), so a caller waits for the answer it needs, not the round.
        self._prefetched: dict[tuple[str, datetime], Future[list[dict[str, Any]] | None]] = {}
        self._prefetched_for: tuple[datetime, datetime] | None = None
        # A bucket's round started ahead in a thread of its own (`prefetch_ahead`) while the collector reads
        # Kubernetes; the collector's thread waits for it to be planned before it uses the source (`_join_ahead`), then
        # for each answer it reads (`query`), and for the whole round at the end (`stop_ahead`).
        self._ahead: _Ahead | None = None
        self._stopping = threading.Event()  # `stop_ahead`: the round's queries not yet sent are not sent

    # ---- plumbing ----
    def query(self, promql: str, at: datetime) -> list[dict[str, Any]]:
        """The answer to one instant query: prefetched for this bucket (`prefetch`; waited for while the round still
        asks it), else asked now."""
        self._join_ahead()
        with self._counting:
            pending = self._prefetched.pop((promql, at), None)
        answer = pending.result() if pending is not None else None
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
        waits for its queries to be known (each answer is then waited for where it is read: the ledger computes and
        writes the bucket while the findings' queries, last in the round, are still answered); had it failed before,
        the round is asked again here, so a failure surfaces where and as it did."""
        self._join_ahead()
        if self._prefetched_for == (start, end):
            return
        self._join_ahead(whole=True)  # a round ahead for another bucket is over before this one's is asked
        self._ask_round(start, end)

    def prefetch_ahead(self, start: datetime, end: datetime) -> None:
        """Start `prefetch(start, end)` in a thread and return: the round depends on nothing the Kubernetes read
        shows, so Prometheus can work on it while the collector reads and records the snapshot. The calling
        thread's next use of this source waits for it (`_join_ahead`); `stop_ahead` ends it early."""
        self._join_ahead(whole=True)
        self._stopping.clear()
        planned: Future[bool] = Future()
        pool = ThreadPoolExecutor(1, thread_name_prefix="prometheus-ahead")
        try:
            self._ahead = _Ahead(pool.submit(self._ask_round, start, end, planned), threading.get_ident(), planned)
        finally:
            pool.shutdown(wait=False)  # the thread ends with the round

    def stop_ahead(self) -> None:
        """End a round started by `prefetch_ahead` that nothing will use (the Kubernetes read failed): its queries
        not yet sent are not sent, and this returns once the ones in flight have answered (each bounded by
        GPUFINOPS_PROMETHEUS_TIMEOUT), so no thread outlives the collection."""
        self._stopping.set()
        try:
            self._join_ahead(whole=True)
        finally:
            self._stopping.clear()

    def _join_ahead(self, *, whole: bool = False) -> None:
        """Wait until the round `prefetch_ahead` started is planned (its queries known, their answers waited for one
        by one in `query`), or over with `whole`, when called from the thread that started it (the round's own
        threads go on). A round that raised before it was planned is forgotten whole: `prefetch` asks it again in
        the caller's thread, where its error surfaces exactly as without the early start."""
        ahead = self._ahead
        if ahead is None or ahead.owner != threading.get_ident():
            return
        if not whole and ahead.planned.result():
            return  # the round goes on: each answer is waited for where it is read
        self._ahead = None
        try:
            ahead.round.result()
        except Exception:  # asked again by `prefetch`, which raises it in the ledger's thread
            with self._counting:
                self._prefetched, self._prefetched_for = {}, None
        if self._stopping.is_set():  # the round was cut short: its answers are incomplete, not kept
            with self._counting:
                self._prefetched, self._prefetched_for = {}, None

    def _ask_round(self, start: datetime, end: datetime, planned: Future[bool] | None = None) -> None:
        """`prefetch`'s round itself (in the caller's thread, or ahead in one of its own, which resolves `planned` once
        the round's queries are known). The ledger's queries come first, the largest answers first (the recorded or
        raw signals), then the findings' (framebuffer, health, vanished GPUs): the ledger's are in while Prometheus
        still works on the findings'."""
        try:
            self._prefetched_for = (start, end)
            with self._counting:
                self._prefetched = {}
            rng, at = window(start, end)
            rules = self.rules_cover(start, end)
            health = self._health_recorded_queries(start, end) if rules else self._health_queries(start, end)
            recorded = self._recorded_query(start, end)
            queries = list(dict.fromkeys([
                *([recorded] if recorded is not None else [(self._signal_query(s, rng), at) for s in SIGNALS]),
                *self._pod_history_queries(start, end),
                self._seen_instant("kube_pod_start_time", "uid", "max", start, end),
                self._namespace_labels_query(start, end),
                *self._owner_queries(start, end),
                *self._node_history_queries(start, end),
                self._seen_instant("kube_node_labels", "node", "min", start, end),
                self._seen_instant("kube_node_labels", "node", "max", start, end),
                *([] if recorded is not None else [self._memory_query(start, end)]),
                *health,
                *self._vanished_queries(start, end),
            ]))
            answers: dict[tuple[str, datetime], Future[list[dict[str, Any]] | None]] = {q: Future() for q in queries}
            with self._counting:
                self._prefetched = dict(answers)
        except BaseException:
            if planned is not None:
                planned.set_result(False)
            raise
        if planned is not None:
            planned.set_result(True)
        # The last XID codes are asked right after the highest ones (health[0], raw or recorded round alike), by the
        # same thread while the round's other queries run: device_health would otherwise ask them in a round of its
        # own.
        then: dict[tuple[str, datetime], Callable[[list[dict]], tuple[str, datetime] | None]] = {
            health[0]: lambda xid_max: self._xid_last_query(xid_max, rng, at)}
        # The recorded signals, the round's largest answer (41,055 series at 10,000 GPUs), are asked alone first, while
        # the collector reads Kubernetes: side by side with the rest they took 4.8 s instead of 1.65 s (load ~6), and
        # the ledger waits for them (bench/README.md, 2026-12-02, branch `bucket`).
        lead = [q for q in queries if q == recorded]
        try:
            self._ask_all(lead, answers, then)
            self._ask_all([q for q in queries if q != recorded], answers, then)
        finally:
            for answer in answers.values():  # none left unresolved, whatever happened: `query` waits on them
                if not answer.done():
                    answer.set_result(None)

    def _ask_all(self, queries: Sequence[tuple[str, datetime]],
                 answers: Mapping[tuple[str, datetime], Future[list[dict[str, Any]] | None]],
                 then: Mapping[tuple[str, datetime], Callable[[list[dict]], tuple[str, datetime] | None]]) -> None:
        """`ask` each query, side by side as query_all does, each answer resolving its future as soon as it is in (None:
        failed). A query in `then` is followed, in its thread, by the query its answer names (if any), kept with the
        round's answers (dropped if it fails) before the first answer is handed out: whoever reads the first finds
        the second."""
        def ask(q: tuple[str, datetime]) -> None:
            answer: list[dict[str, Any]] | None = None
            try:
                if self._stopping.is_set():
                    return
                try:
                    answer = self.ask(*q)
                except PrometheusError:
                    return
                follow = then[q](answer) if q in then else None
                if follow is not None and not self._stopping.is_set():
                    try:
                        followed = self.ask(*follow)
                    except PrometheusError:
                        return
                    kept: Future[list[dict[str, Any]] | None] = Future()
                    kept.set_result(followed)
                    with self._counting:
                        self._prefetched[follow] = kept
            finally:
                answers[q].set_result(answer)

        workers = min(settings.GPUFINOPS_PROMETHEUS_PARALLEL, len(queries))
        if workers <= 1:
            for q in queries:
                ask(q)
            return
        with ThreadPoolExecutor(workers, thread_name_prefix="prometheus") as pool:
            list(pool.map(ask, queries))

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
            v = sample_value(r)
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
        caller then reads the raw series. Asked once per bucket (both edges first, `rules_cover`, then the series,
        in the bucket's round when there is one): the ledger's activity and the findings' framebuffer share the
        answer.

        Each recorded series is its raw series (`max by` the labels read here: one series per pod, GPU and
        signal), evaluated at the scrape interval, so its average over the bucket is the raw series' average.
        """
        self._join_ahead()
        if self._recorded is not None and self._recorded[0] == (start, end):
            return self._recorded[1]
        query = self._recorded_query(start, end)
        answer: dict[str, list[dict]] | None = None
        if query is not None:
            answer = {}
            for r in self.query(*query):
                answer.setdefault(r["metric"].get("signal", ""), []).append(r)
        self._recorded = ((start, end), answer)
        return answer

    def _recorded_query(self, start: datetime, end: datetime) -> tuple[str, datetime] | None:
        """The recorded signals' query of `[start, end)` when `recorded` reads them (else None: the raw series)."""
        # A renamed signal metric: the activity is read raw, the health fields (fixed names) still recorded.
        if not (self.rules_cover(start, end) and all(self.metrics[s] == DEFAULT_METRICS[s] for s in SIGNALS)):
            return None
        rng, at = window(start, end)
        return f"avg_over_time({RECORDED}[{rng}])", at

    def rules_cover(self, start: datetime, end: datetime) -> bool:
        """Whether the recording rules' series cover `[start, end)`: their heartbeat at both edges (asked once per
        bucket; False when GPUFINOPS_PROMETHEUS_RECORDING_RULES is off). The activity and the findings' health fields
        then read the recorded series."""
        self._join_ahead()
        if self._covered is not None and self._covered[0] == (start, end):
            return self._covered[1]
        covered = False
        if settings.GPUFINOPS_PROMETHEUS_RECORDING_RULES:
            edge, edge_at = window(end - RECORDED_EDGE, end)
            beats = f"count_over_time({RECORDED_HEARTBEAT}[{edge}])"
            first, last = self.query_all([(beats, min(start + RECORDED_EDGE, end) - timedelta(milliseconds=1)),
                                          (beats, edge_at)])
            covered = bool(first and last)
        self._covered = ((start, end), covered)
        return covered

    def _memory(self, start: datetime, end: datetime) -> list[dict]:
        """`max by (MEMORY_BY)` of every pod series' framebuffer averaged over the bucket: from the recorded series
        when they cover it, else one query; kept for the bucket (the findings' idle pods and the savings' pods
        both read it: one query, where each asked its own)."""
        if self._memory_answer is not None and self._memory_answer[0] == (start, end):
            return self._memory_answer[1]
        recorded = self.recorded(start, end)
        if recorded is not None:  # already read: `max by` done here
            answer = max_by(self.MEMORY_BY, recorded.get("fb_used", []))
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
        names = regex_of(uuids)
        queries = [(f'max by (UUID) (avg_over_time({self.metrics[s]}{{{unheld},GPU_I_ID="",UUID=~"{names}"}}'
                    f'[{rng}]))', at) for s in SIGNALS]
        out: dict[str, dict[str, float]] = {}
        for signal, answer in zip(SIGNALS, self.query_all(queries), strict=True):
            scale = SIGNAL_SCALE.get(signal, 1.0)
            for r in answer:
                v, uuid = sample_value(r), r["metric"].get("UUID", "")
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
            name, v = r["metric"].get(by, ""), sample_value(r)
            if name in names and v:
                out[name] = v
        rest = sorted(set(names) - set(out))
        if not rest:
            return out
        batches = [rest[i:i + MAX_REGEX_NAMES] for i in range(0, len(rest), MAX_REGEX_NAMES)]
        selectors = ([f'{metric}{{{by}=~"{regex_of(batch)}"}}' for batch in batches] if len(batches) <= 4
                     else [metric])
        for selector in selectors:
            q = f"{fn} by ({by}) ({fn}_over_time(timestamp({selector})[{rng}:{HISTORY_STEP_SECONDS}s]))"
            for r in self.query(q, at):
                name, v = r["metric"].get(by, ""), sample_value(r)
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
            v = sample_value(r)
            if v:
                done[r["metric"].get("uid", "")] = v
        seen = self._seen("kube_pod_start_time", "uid", "max", start, end,
                          {r["metric"].get("uid", "") for r in starts} - {""})
        app: dict[str, dict[str, dict[str, float]]] = {}
        init: dict[str, dict[str, dict[str, float]]] = {}
        nodes: dict[str, str] = {}
        for answer, target in zip(request_answers, (app, init), strict=True):
            for r in answer:
                m, v = r["metric"], sample_value(r)
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
            m, v = r["metric"], sample_value(r)
            uid = m.get("uid", "")
            if not uid or (uid not in app and uid not in init):
                continue
            pods.append(
                PodHistory(
                    uid=uid,
                    namespace=m.get("namespace", ""),
                    name=m.get("pod", ""),
                    node=nodes.get(uid, ""),
                    started=sample_time(v) if v else None,
                    finished=sample_time(done[uid]) if uid in done else None,
                    last_seen=sample_time(seen[uid]) if uid in seen else None,
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
                res, v = ksm_resource(r["metric"].get("resource", "")), sample_value(r)
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
                    first_seen=sample_time(first.get(name, start.timestamp())),
                    last_seen=sample_time(last.get(name, end.timestamp())),
                )
            )
        return nodes
