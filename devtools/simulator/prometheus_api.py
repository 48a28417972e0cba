"""A simulated Prometheus: the HTTP query API over a scenario's dcgm-exporter and kube-state-metrics series.

    srv = start_prometheus(scenario, step=60)     # srv.url, srv.queries, srv.stop()
    GET/POST {srv.url}/api/v1/query?query=...&time=...

The series are what a Prometheus scraping the scenario every ``step`` seconds would hold (the same rows
as ``simulate export-openmetrics``, on the multiples of ``step``), and queries are answered by the
PromQL subset of ``promql``; a query outside it is answered 400 ``bad_data``, never approximated.

Samples are not stored: a scenario's state is constant between change points (``exposition.ChangePoints``),
so the series at a scrape are computed once per state (a *frame*) and a range of scrapes is read as runs
of equal samples. DCGM series sets are computed once per pod/node change and their values once per
5-minute segment.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
from collections import OrderedDict
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlparse

from . import serving
from .exposition import (
    DCGM_METRICS,
    KSM_FAMILIES,
    SEG,
    ChangePoints,
    DcgmSeries,
    health_recorded_field,
    health_recorded_kept,
    heartbeat_rows,
    ksm_controller_rows,
    ksm_namespace_rows,
    ksm_node_rows,
    ksm_pod_rows,
    ksm_pod_state,
    tsdb_dcgm_series,
    tsdb_ksm_labels,
    tsdb_layout,
)
from .model import ACTIVITY_KEYS, Scenario
from .promql import Evaluator, PromQLError, PromQLExecutionError, format_value, label_key


class _Cache:
    """A small thread-safe LRU: ``get(key, build)``. It holds ``size`` values, or values whose ``weigh`` sums to
    at most ``size`` (the newest is kept even if it alone weighs more)."""

    def __init__(self, size: int, weigh=None):
        self.size = size
        self.weigh = weigh or (lambda _value: 1)
        self.weight = 0
        self.items: OrderedDict = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key, build):
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        value = build()
        with self.lock:
            if key not in self.items:  # another thread may have built it meanwhile
                self.items[key] = value
                self.weight += self.weigh(value)
            while self.weight > self.size and len(self.items) > 1:
                self.weight -= self.weigh(self.items.popitem(last=False)[1])
        return value


class _Interner:
    """One (key, labels) pair per series: frames share them, and keys are canonical (sorted)."""

    def __init__(self) -> None:
        self.seen: dict = {}

    def __call__(self, metric: str, labels: list) -> tuple:
        raw = (metric, *labels)
        hit = self.seen.get(raw)
        if hit is None:
            d = {"__name__": metric, **dict(labels)}
            hit = self.seen[raw] = (label_key(d), d)
        return hit


class _Frame:
    """The series of one family at one state: ``rows[metric] = [(key, labels, value), ...]``."""

    def __init__(self, rows: dict):
        self.rows = rows
        self.selections = _Cache(64)

    def select(self, matchers, metrics) -> list:
        return self.selections.get((matchers, metrics), lambda: _select(self.rows, matchers, metrics))


def _select(rows: dict, matchers, metrics) -> list:
    rest = [m for m in matchers if m.name != "__name__"]
    out = []
    for metric in metrics:
        for row in rows.get(metric, ()):
            labels = row[1]
            if all(m.matches(labels.get(m.name, "")) for m in rest):
                out.append(row)
    return out


class _DcgmFrame:
    """DCGM values of one segment over the series of one state: selections are made on the series (cached
    across segments), and only the selected entities' values are computed."""

    def __init__(self, tsdb: SimulatedTSDB, skeleton: _DcgmSkeleton, t: float, activity_only: bool):
        self.tsdb = tsdb
        self.skeleton = skeleton
        self.t = t
        self.activity_only = activity_only
        self.values: list = [None] * len(skeleton.present.entities)

    def select(self, matchers, metrics) -> list:
        rows = self.skeleton.select(matchers, metrics)
        values = self.ensure(rows)
        out = []
        for k, d, slot, vkey in rows:
            value = float(values[slot][vkey])
            # A recorded health series holds a sample only where the field has something to report (the rules).
            field = health_recorded_field(d["__name__"], d)
            if field is None or health_recorded_kept(field, value):
                out.append((k, d, value))
        return out

    def ensure(self, rows) -> list:
        """The values list, with every slot ``rows`` read computed."""
        values = self.values
        for _k, _d, slot, _vkey in rows:
            if values[slot] is None:
                self._compute(slot)
        return values

    def _compute(self, slot: int) -> None:
        entities = self.skeleton.present.entities
        e, holders = entities[slot]
        kids = None
        if e.mig_parent:
            slots = self.skeleton.slot_of
            kids = []
            for c in e.children:
                if self.values[slots[c]] is None:
                    self._compute(slots[c])
                kids.append(self.values[slots[c]])
        self.values[slot] = self.tsdb.scenario.entity_values(e, self.t, holders, kids=kids,
                                                             activity_only=self.activity_only)


class _DcgmSkeleton:
    def __init__(self, present: DcgmSeries, rows: dict):
        self.present = present
        self.rows = rows  # metric -> [(key, labels, slot, value key)]
        self.slot_of = {e.idx: slot for slot, (e, _holders) in enumerate(present.entities)}
        self.selections = _Cache(64)

    def select(self, matchers, metrics) -> list:
        return self.selections.get((matchers, metrics), lambda: _select(self.rows, matchers, metrics))


class _DcgmFamily:
    def __init__(self, tsdb: SimulatedTSDB, renames: dict):
        self.tsdb = tsdb
        self.layout = tsdb_layout(tsdb.scenario, tsdb.hostname_label, tsdb.exported, renames=renames)
        self.metrics = tuple(self.layout.families)
        self.activity_metrics = frozenset(renames.get(m, m) for m, key, _h in DCGM_METRICS if key in ACTIVITY_KEYS)
        self.skeletons = _Cache(16)
        self.frames = _Cache(256)

    def key(self, t: float):
        return self.tsdb.changes.dcgm_key(t)

    def next_change(self, t: float) -> float:
        return min(self.tsdb.changes.next_dcgm(t), (t // SEG + 1) * SEG)

    def _skeleton(self, series_key, t: float) -> _DcgmSkeleton:
        def build():
            if len(self.layout.cache) > 200_000:  # label sets of (entity, holders) kept across states: bounded
                self.layout.cache.clear()
            present = tsdb_dcgm_series(self.tsdb.scenario, t, layout=self.layout)
            rows: dict = {}
            for metric, labels, slot, vkey in present.series:
                key, d = self.tsdb.intern(metric, labels)
                rows.setdefault(metric, []).append((key, d, slot, vkey))
            return _DcgmSkeleton(present, rows)

        return self.skeletons.get(series_key, build)

    def merge_runs(self, blocks: list, matchers, metrics, out: dict, step: int) -> None:
        """``select_range`` for DCGM: blocks sharing a series set are read series by series."""
        i = 0
        while i < len(blocks):
            skeleton = blocks[i][0].skeleton
            j = i + 1
            while j < len(blocks) and blocks[j][0].skeleton is skeleton:
                j += 1
            group = [(frame.ensure(rows), first, last, n)
                     for rows in (skeleton.select(matchers, metrics),)
                     for frame, first, last, n in blocks[i:j]]
            for key, labels, slot, vkey in skeleton.select(matchers, metrics):
                entry = out.get(key)
                runs = entry[2] if entry is not None else None
                field = health_recorded_field(labels["__name__"], labels)
                for values, first, last, n in group:
                    value = float(values[slot][vkey])
                    if field is not None and not health_recorded_kept(field, value):
                        continue  # not stored (the rules' filter): a gap in the series
                    if runs is None:
                        runs = [[first, last, n, value]]
                        out[key] = (key, labels, runs)
                    elif runs[-1][1] == first - step and runs[-1][3] == value:
                        runs[-1][1] = last
                        runs[-1][2] += n
                    else:
                        runs.append([first, last, n, value])
            i = j

    def frame(self, key, t: float, metrics) -> _DcgmFrame:
        # The activity signals are cheaper to compute than the rest: a frame holds one or the other.
        activity_only = self.activity_metrics.issuperset(metrics)

        def build():
            return _DcgmFrame(self.tsdb, self._skeleton(key[1], t), t, activity_only)

        return self.frames.get((key, activity_only), build)


class _KsmFamily:
    metrics = tuple(KSM_FAMILIES)

    def __init__(self, tsdb: SimulatedTSDB):
        self.tsdb = tsdb
        self.frames = _Cache(64)
        self.objects: dict = {}  # (object, its state) -> [(metric, key, labels, value)]: frames share them

    def key(self, t: float):
        return self.tsdb.changes.ksm_key(t)

    def next_change(self, t: float) -> float:
        return self.tsdb.changes.next_ksm(t)

    def _rows(self, cache_key, rows_at) -> list:
        got = self.objects.get(cache_key)
        if got is None:
            intern = self.tsdb.intern
            got = self.objects[cache_key] = [
                (metric, *intern(metric, tsdb_ksm_labels(labels)), float(v)) for metric, labels, v in rows_at()
            ]
        return got

    def frame(self, key, t: float, metrics) -> _Frame:
        def build():
            sc = self.tsdb.scenario
            parts = [self._rows(("pod", p.idx, ksm_pod_state(p, t)), lambda p=p: ksm_pod_rows(sc, p, t))
                     for p in sc.pods if p.created <= t < p.deleted]
            parts += [self._rows(("controller", key), lambda c=c: ksm_controller_rows(c))
                      for key, c in sc.controllers.items() if c.visible(t)]
            parts.append(self._rows(("namespaces",), lambda: ksm_namespace_rows(sc)))
            parts += [self._rows(("node", n.name, n.unschedulable(t)), lambda n=n: ksm_node_rows(sc, n, t))
                      for n in sc.nodes if n.created <= t]
            if sc.recording_rules:
                parts.append(self._rows(("recording rules",), heartbeat_rows))
            rows: dict = {}
            for part in parts:
                for metric, k, d, v in part:
                    rows.setdefault(metric, []).append((k, d, v))
            return _Frame(rows)

        return self.frames.get(key, build)


class SimulatedTSDB:
    """The samples a Prometheus scraping ``scenario`` every ``step`` seconds would hold, as a ``promql.Storage``.

    Scrapes sit on the multiples of ``step`` in [since, until) (default: the scenario's start and end).
    ``hostname_label``/``exported``/``renames`` shape the DCGM series as ``simulate export-openmetrics`` does."""

    def __init__(self, scenario: Scenario, *, step: int = 60, hostname_label: str = "Hostname",
                 exported: bool = False, include_ksm: bool = True, since: float | None = None,
                 until: float | None = None, renames: dict | None = None):
        if int(step) != step or step <= 0:
            raise ValueError("step must be a positive number of seconds")
        self.scenario = scenario
        self.step_ms = int(step * 1000)
        self.hostname_label = hostname_label
        self.exported = exported
        self.changes = ChangePoints(scenario)
        since = scenario.t0 if since is None else since
        until = scenario.t1 if until is None else until
        self.first_ms = math.ceil(since * 1000 / self.step_ms) * self.step_ms
        self.last_ms = (math.ceil(until * 1000 / self.step_ms) - 1) * self.step_ms  # until is exclusive
        self.intern = _Interner()
        self.families = [_DcgmFamily(self, dict(renames or {}))] + ([_KsmFamily(self)] if include_ksm else [])

    # ---- promql.Storage
    def select_range(self, matchers, mint: int, maxt: int):
        out: dict = {}
        step = self.step_ms
        for family, metrics in self._families(matchers):
            blocks = self._blocks(family, metrics, mint, maxt)
            if isinstance(family, _DcgmFamily):
                family.merge_runs(blocks, matchers, metrics, out, step)
                continue
            for frame, first, last, n in blocks:
                for key, labels, value in frame.select(matchers, metrics):
                    entry = out.get(key)
                    if entry is None:
                        out[key] = (key, labels, [[first, last, n, value]])
                        continue
                    run = entry[2][-1]
                    if run[1] == first - step and run[3] == value:
                        run[1] = last
                        run[2] += n
                    else:
                        entry[2].append([first, last, n, value])
        return list(out.values())

    def select_instant(self, matchers, t: int, lookback: int):
        out: dict = {}
        for family, metrics in self._families(matchers):
            for frame, _first, last, _n in reversed(self._blocks(family, metrics, t - lookback, t)):
                for key, labels, value in frame.select(matchers, metrics):
                    if key not in out:
                        out[key] = (key, labels, last, value)
        return list(out.values())

    # ---- frames
    def _families(self, matchers):
        names = [m for m in matchers if m.name == "__name__"]
        for family in self.families:
            metrics = tuple(f for f in family.metrics if all(m.matches(f) for m in names))
            if metrics:
                yield family, metrics

    def _blocks(self, family, metrics, mint: int, maxt: int) -> list:
        """The scrapes in [mint, maxt] grouped by state: [(frame, first ms, last ms, count)]."""
        step = self.step_ms
        g = max(-(-mint // step) * step, self.first_ms)
        end = min(maxt // step * step, self.last_ms)
        blocks = []
        while g <= end:
            t = g / 1000.0
            change = family.next_change(t)
            last = end if change == math.inf else min(end, (math.ceil(change * 1000.0 / step) - 1) * step)
            blocks.append((family.frame(family.key(t), t, metrics), g, last, (last - g) // step + 1))
            g = last + step
        return blocks


# ------------------------------------------------------------------------------------------ HTTP
def _parse_time(value: str | None) -> int:
    """Prometheus' time parameter (Unix seconds with decimals, or RFC 3339) as milliseconds."""
    if value is None or value == "":
        return int(datetime.now(UTC).timestamp() * 1000)
    try:
        seconds = float(value)
    except ValueError:
        try:
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise PromQLError(f"cannot parse {value!r} to a valid timestamp") from exc
        if dt.tzinfo is None:
            raise PromQLError(f"cannot parse {value!r} to a valid timestamp") from None
        seconds = dt.timestamp()
    if math.isnan(seconds) or math.isinf(seconds):
        raise PromQLError(f"cannot parse {value!r} to a valid timestamp")
    whole = math.floor(seconds)
    return int(whole) * 1000 + round((seconds - whole) * 1000)


class PrometheusServer(serving.Server):
    """``/api/v1/query`` (GET or POST) answered from a ``SimulatedTSDB``; ``/-/ready``, ``/-/healthy``;
    ``/api/v1/status/buildinfo`` and ``/api/v1/status/flags`` (``retention``: the TSDB retention it reports)."""

    retention = "15d"  # Prometheus' default
    # Encoded answers kept, by bytes: a re-collection of the same hours sends the same queries at the same times
    # (a collection of the demo's 48 hours: 2,060 queries, 7 MB of answers), and each writer of
    # tests/ingest/test_concurrent_recollection.py otherwise had them evaluated again, most of what it cost the
    # test process.
    ANSWER_CACHE_BYTES = 64 << 20

    def __init__(self, tsdb: SimulatedTSDB, host: str, port: int):
        self.tsdb = tsdb
        self.evaluator = Evaluator(tsdb)
        self.queries = 0
        self.answers = _Cache(self.ANSWER_CACHE_BYTES, weigh=lambda answer: len(answer[1]))
        super().__init__(_make_handler(self), host, port, "sim-prometheus")

    def encoded_answer(self, params: dict) -> tuple[int, bytes]:
        """The answer to ``params`` as the HTTP body; the same at the same explicit ``time`` (the scenario is fixed),
        so kept. Without a ``time`` it is now's, never kept."""
        self.queries += 1

        def build() -> tuple[int, bytes]:
            code, body = self._evaluate(params)
            return code, json.dumps(body).encode()

        if not params.get("time"):
            return build()
        return self.answers.get(tuple(sorted(params.items())), build)

    def _evaluate(self, params: dict) -> tuple[int, dict]:
        query = params.get("query")
        try:
            if not query:
                raise PromQLError("query parameter is missing")
            t = _parse_time(params.get("time"))
            kind, result = self.evaluator.query(query, t)
        except PromQLExecutionError as exc:
            return 422, {"status": "error", "errorType": "execution", "error": str(exc)}
        except PromQLError as exc:
            return 400, {"status": "error", "errorType": "bad_data", "error": str(exc)}
        at = t / 1000.0
        if kind == "scalar":
            data = {"resultType": "scalar", "result": [at, format_value(result)]}
        else:
            data = {"resultType": "vector",
                    "result": [{"metric": s.labels, "value": [at, format_value(s.value)]} for s in result]}
        return 200, {"status": "success", "data": data}


def _make_handler(srv: PrometheusServer):
    class Handler(serving.Handler):
        server_version = "sim-prometheus/2.42"

        def _params(self, body: str = "") -> dict:
            q = parse_qs(urlparse(self.path).query, keep_blank_values=True)
            for k, v in parse_qs(body, keep_blank_values=True).items():
                q.setdefault(k, []).extend(v)
            return {k: v[-1] for k, v in q.items()}

        def _route(self, body: str = "") -> None:
            path = urlparse(self.path).path
            if path == "/api/v1/query":
                code, encoded = srv.encoded_answer(self._params(body))
                self.send(code, encoded)
            elif path == "/api/v1/status/buildinfo":
                self.send(200, {"status": "success", "data": {"version": "2.42.0-sim", "revision": "sim",
                                                              "branch": "sim", "goVersion": "go1.22"}})
            elif path == "/api/v1/status/flags":  # Prometheus' defaults: 15 days' retention
                self.send(200, {"status": "success", "data": {"storage.tsdb.retention.time": srv.retention,
                                                              "storage.tsdb.retention.size": "0B"}})
            elif path in ("/-/ready", "/-/healthy"):
                self.send(200, "Prometheus is Ready.\n", "text/plain; charset=utf-8")
            else:
                self.send(404, "404 page not found\n", "text/plain; charset=utf-8")

        def do_GET(self):
            with contextlib.suppress(BrokenPipeError):
                self._route()

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            with contextlib.suppress(BrokenPipeError):
                self._route(body)

    return Handler


def start_prometheus(scenario: Scenario, host: str = "127.0.0.1", port: int = 0, **tsdb_options) -> PrometheusServer:
    """A simulated Prometheus over ``scenario`` on ``host:port`` (0: a free port); see ``SimulatedTSDB``."""
    return PrometheusServer(SimulatedTSDB(scenario, **tsdb_options), host, port).start()
