"""Every query the collector sends answers the same from the simulated Prometheus as from a real one loaded
with the same history (`simulate export-openmetrics` + promtool): same series, same values to 1e-9. So do the
queries of the kinds findings send (health fields, counters' increases by vector arithmetic, memory held, activity
of devices nobody holds) over the hours of the demo's health events."""

from __future__ import annotations

import contextlib
import http.client
import inspect
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command

from apps.ingest.collectors.prometheus import PrometheusError, PrometheusSource
from apps.inventory.models import Cluster
from apps.usage.sources import MetricsSource
from devtools.simulator.prometheus_api import start_prometheus
from devtools.simulator.scenarios import build_scenario
from tests.harness.services import require_binary

pytestmark = pytest.mark.services

END = datetime(2026, 11, 30, tzinfo=UTC)
DAYS = 8
HOURS = 4
STEP = 60
LABEL_KEYS = ("team", "kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/cluster-queue-name", "nvidia.com/gpu.product",
              "nvidia.com/gpu.count", "karpenter.sh/nodepool", "cloud.google.com/gke-nodepool")
VARIANTS = {"plain": (), "operator": ("--exported-labels", "--hostname-label", "hostname")}
# The metric names exporters with other CSVs use: the clock-event reasons before DCGM 3.1, the XID from DCGM 4.6.
RENAMES = {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS": "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
           "DCGM_FI_DEV_XID_ERRORS": "DCGM_FI_DEV_XID_ERROR"}
HEALTH_VARIANTS = {**VARIANTS, "renamed": tuple(a for old, new in RENAMES.items()
                                                for a in ("--rename-metric", f"{old}={new}"))}
# Hours of the demo (from its start) with every health event but the first two (the a100-0 remap failure goes on).
HEALTH_HOURS = (33, 42)


def _pair(since: datetime, until: datetime, extra: tuple, scenario: str = "demo",
          days: float = DAYS):
    """(real Prometheus, simulated Prometheus) over [since, until) of a scenario (the demo), shaped by `extra`
    options."""
    from tests.harness import cache
    from tests.harness.backfill import WINDOW_SECONDS
    from tests.harness.prometheus import history_blocks
    from tests.harness.prometheus import start_prometheus as start_real

    require_binary("prometheus")
    require_binary("promtool")
    # The export is a pure function of these arguments and the simulator's code (END is fixed): its blocks are cached
    # by them (tests/harness/prometheus.py), so a later session costs neither the export nor promtool.
    argv = ["--scenario", scenario, "--since", since.isoformat(), "--until", until.isoformat(), "--end",
            END.isoformat(), "--days", str(days), "--step", str(STEP), *extra]
    # One file per promtool block window: no split pass before promtool (tests/harness/backfill.py).
    blocks = history_blocks(
        ["against-real", *argv], cache.source_files("devtools/simulator", "devtools/management"),
        lambda path: call_command("simulate", "export-openmetrics", *argv, "--out", str(path),
                                  "--window-seconds", str(WINDOW_SECONDS)),
    )
    real = start_real(None, blocks=blocks)
    real.wait_for("kube_node_labels", at=until.timestamp() - STEP, timeout=60)
    exported = "--exported-labels" in extra
    renames = dict(extra[i + 1].split("=", 1) for i, a in enumerate(extra) if a == "--rename-metric")
    simulated = start_prometheus(
        build_scenario(scenario, seed=0, end=END, days=days), step=STEP, since=since.timestamp(),
        until=until.timestamp(), exported=exported, hostname_label="hostname" if exported else "Hostname",
        renames=renames,
    )
    return real, simulated


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def pair(request):
    """(real Prometheus, simulated Prometheus) over the same last hours of the demo, in one label variant."""
    real, simulated = _pair(END - timedelta(hours=HOURS), END, VARIANTS[request.param])
    yield real, simulated
    simulated.stop()
    real.close()


@pytest.fixture(scope="module", params=sorted(HEALTH_VARIANTS))
def health_pair(request):
    """The same over the hours of the demo's health events, in one label or metric-name variant."""
    start = END - timedelta(days=DAYS)
    since, until = (start + timedelta(hours=h) for h in HEALTH_HOURS)
    real, simulated = _pair(since, until, (*HEALTH_VARIANTS[request.param], "--metrics", ",".join(findings_families())))
    yield real, simulated, since, until
    simulated.stop()
    real.close()


def collector_queries(url: str) -> list[tuple[str, datetime]]:
    """The (PromQL, time) of every query the collector's MetricsSource methods send for each bucket of the
    window: full hours, a provisional (partial) hour, and a bucket reaching back before the history."""
    source = PrometheusSource(Cluster(name="compare", prometheus_url=url))
    sent: list[tuple[str, datetime]] = []
    send = source.ask  # every query sent, the ones a bucket asks ahead (PrometheusSource.prefetch) included

    def record(promql: str, at: datetime):  # type: ignore[no-untyped-def]
        sent.append((promql, at))
        return send(promql, at)

    source.ask = record  # type: ignore[method-assign]
    buckets = [(END - timedelta(hours=h), END - timedelta(hours=h - 1)) for h in range(HOURS - 1, 0, -1)]
    buckets += [(END - timedelta(hours=1), END - timedelta(minutes=37)),
                (END - timedelta(hours=HOURS + 1), END - timedelta(hours=HOURS))]
    methods = [name for name, fn in vars(MetricsSource).items() if inspect.isfunction(fn) and not name.startswith("_")]
    assert {"activity", "has_dcgm", "pod_history", "node_history", "namespace_labels"} <= set(methods)
    # The arguments past (start, end) that methods take: some devices the world has and one it has not, the
    # findings' activity threshold. Parameters with a default are left to it.
    uuids = sorted({r["metric"].get("UUID", "") for r in send("group by (UUID) (DCGM_FI_DEV_FB_USED)", END)})[:3]
    pods = sorted({r["metric"].get("pod", "") for r in send("group by (pod) (kube_pod_start_time)", END)} - {""})[:3]
    arguments = {"label_keys": LABEL_KEYS, "uuids": [*uuids, "GPU-not-in-this-world"], "above": 0.05,
                 "pods": [*pods, "pod-not-in-this-world"]}
    for start, end in buckets:
        for name in methods:
            params = inspect.signature(getattr(source, name)).parameters
            names = list(params)
            needed = [p for p in names[2:] if params[p].default is inspect.Parameter.empty]
            assert names[:2] == ["start", "end"] and set(needed) <= set(arguments), (
                f"MetricsSource.{name}{names}: teach this test its arguments"
            )
            positional = [arguments[p] for p in needed if params[p].kind is not inspect.Parameter.KEYWORD_ONLY]
            keywords = {p: arguments[p] for p in needed if params[p].kind is inspect.Parameter.KEYWORD_ONLY}
            with contextlib.suppress(PrometheusError):  # a refused query is compared like the others
                getattr(source, name)(start, end, *positional, **keywords)
    return sent


def _get(base: str, promql: str, at: datetime) -> tuple[int, dict]:
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": promql, "time": at.timestamp()})
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


class _Api:
    """`_get` over one kept-alive connection: `_compare` sends each server thousands of queries a module, and a new
    connection per query (a thread of the simulated server's, a goroutine and socket of Prometheus') cost a third of
    answering them."""

    def __init__(self, url: str) -> None:
        parsed = urllib.parse.urlsplit(url)
        self.connection = http.client.HTTPConnection(parsed.hostname or "", parsed.port, timeout=30)

    def get(self, promql: str, at: datetime) -> tuple[int, dict]:
        path = "/api/v1/query?" + urllib.parse.urlencode({"query": promql, "time": at.timestamp()})
        try:
            return self._send(path)
        except (http.client.RemoteDisconnected, ConnectionError):  # the server closed an idle connection: once more
            self.connection.close()
            return self._send(path)

    def _send(self, path: str) -> tuple[int, dict]:
        self.connection.request("GET", path)
        response = self.connection.getresponse()
        return response.status, json.load(response)

    def close(self) -> None:
        self.connection.close()


def _series(body: dict) -> dict:
    return {json.dumps(r["metric"], sort_keys=True): (r["value"][0], float(r["value"][1]))
            for r in body["data"]["result"]}


def _compare(real, simulated, sent) -> int:
    """Each query's answer from both, compared; the number of non-empty answers."""
    with contextlib.closing(_Api(real.url)) as real_api, contextlib.closing(_Api(simulated.url)) as simulated_api:
        return _compare_answers(real_api, simulated_api, sent)


def _compare_answers(real: _Api, simulated: _Api, sent) -> int:
    nonempty = 0
    for promql, at in sent:
        code_real, body_real = real.get(promql, at)
        code_sim, body_sim = simulated.get(promql, at)
        assert (code_sim, body_sim["status"]) == (code_real, body_real["status"]), (promql, body_real, body_sim)
        if body_real["status"] != "success":
            assert body_sim["errorType"] == body_real["errorType"], promql
            continue
        assert body_sim["data"]["resultType"] == body_real["data"]["resultType"] == "vector"
        expected, got = _series(body_real), _series(body_sim)
        assert got.keys() == expected.keys(), (promql, at, set(got) ^ set(expected))
        for key, (ts, value) in expected.items():
            assert got[key][0] == ts, (promql, key)
            assert got[key][1] == pytest.approx(value, rel=1e-9, abs=1e-9), (promql, at, key)
        nonempty += bool(expected)
    return nonempty


def test_every_collector_query_answers_the_same(pair):
    real, simulated = pair
    sent = collector_queries(real.url)
    assert len({q for q, _at in sent}) >= 15
    assert _compare(real, simulated, sent) > len(sent) // 2


COUNTERS = ("DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_DEV_THERMAL_VIOLATION", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS")
# Of the kinds findings send: {r} is the bucket's range, {xid} and {clock} the metric names in the variant,
# {device} the labels naming a GPU whatever their spelling.
FINDINGS_QUERIES = [
    "max_over_time({xid}[{r}])",
    "last_over_time({xid}[{r}])",
    "max by ({device}) (max_over_time({xid}[{r}])) > 0",
    "max by ({device}) (last_over_time({xid}[{r}])) > 0",
    "max_over_time({clock}[{r}])",
    "max by ({device}) (max_over_time({clock}[{r}])) >= 8",
    "min by ({device}) (min_over_time({clock}[{r}]))",
    "sum_over_time({clock}[{r}]) / count_over_time({clock}[{r}])",
    *(f"max_over_time({c}[{{r}}]) - min_over_time({c}[{{r}}])" for c in COUNTERS),
    *(f"(max_over_time({c}[{{r}}]) - min_over_time({c}[{{r}}])) > 0" for c in COUNTERS),
    "(max_over_time(DCGM_FI_DEV_POWER_VIOLATION[{r}]) - min_over_time(DCGM_FI_DEV_POWER_VIOLATION[{r}])) / 1e9",
    "max by ({device}) (max_over_time(DCGM_FI_DEV_ROW_REMAP_FAILURE[{r}])) > 0",
    'avg_over_time(DCGM_FI_DEV_FB_USED{pod!=""}[{r}])',
    'avg_over_time(DCGM_FI_DEV_FB_USED{exported_pod!=""}[{r}])',
    'avg_over_time(DCGM_FI_DEV_FB_USED{pod!=""}[{r}]) > 1024',
    'avg_over_time(DCGM_FI_PROF_SM_ACTIVE{pod=""}[{r}])',
    'avg_over_time(DCGM_FI_PROF_SM_ACTIVE{pod="",exported_pod=""}[{r}]) > 0.05',
    'avg_over_time(DCGM_FI_PROF_SM_ACTIVE{exported_pod=""}[{r}]) > 0.05',
    'max by ({device}, GPU_I_ID) (avg_over_time(DCGM_FI_PROF_SM_ACTIVE{pod="",exported_pod=""}[{r}]))',
    "max by ({device}) (max_over_time(timestamp(DCGM_FI_DEV_FB_USED)[{r}:30s]))",
    "max by ({device}) (DCGM_FI_DEV_FB_USED)",
    "count by (Hostname, hostname) (last_over_time(DCGM_FI_DEV_FB_USED[{r}]))",
    "avg_over_time(DCGM_FI_DEV_FB_USED[{r}]) / (avg_over_time(DCGM_FI_DEV_FB_USED[{r}]) + "
    "avg_over_time(DCGM_FI_DEV_FB_FREE[{r}]))",
    '100 * avg_over_time(DCGM_FI_PROF_SM_ACTIVE{pod!=""}[{r}]) - avg_over_time(DCGM_FI_DEV_GPU_UTIL{pod!=""}[{r}])',
    "-max_over_time({xid}[{r}]) % 7 + 1",
    "max_over_time(kube_replicaset_owner[{r}])",
    'max_over_time(kube_job_owner{owner_is_controller="true"}[{r}])',
    'max_over_time(kube_pod_owner{owner_is_controller="true"}[{r}])',
    # a match group with two series on the right: Prometheus' execution error, from both
    'DCGM_FI_DEV_FB_USED - {__name__=~"DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_FB_FREE"}',
]


def findings_families() -> list[str]:
    """The families FINDINGS_QUERIES read, in either spelling of the renamed ones, and the one `_pair` waits for: all
    the real Prometheus of `health_pair` is loaded with. A PromQL answer depends only on the series its selectors
    name, so leaving the others out (more than half of the export's samples: pod phases, resource requests, node
    capacity, temperatures, ...) changes no answer compared, and halves the export and its backfill."""
    from devtools.simulator.exposition import DCGM_FAMILIES, KSM_FAMILIES

    known = {*DCGM_FAMILIES, *KSM_FAMILIES, *RENAMES.values()}
    xid, clock = "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
    text = " ".join(_query(q, xid=x, clock=c) for q in FINDINGS_QUERIES
                    for x, c in ((xid, clock), (RENAMES[xid], RENAMES[clock])))
    return sorted(known & {*re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", text), "kube_node_labels"})


def _query(template: str, **names: str) -> str:
    for key, value in names.items():
        template = template.replace("{" + key + "}", value)
    return template


def test_every_findings_query_answers_the_same(health_pair):
    real, simulated, since, until = health_pair
    names = RENAMES if "DCGM_FI_DEV_XID_ERROR" in _names(real) else {name: name for name in RENAMES}
    assert set(names.values()) <= _names(real)
    xid, clock = names["DCGM_FI_DEV_XID_ERRORS"], names["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"]
    device = "UUID, uuid, Hostname, hostname"
    sent = []
    hour = since
    while hour < until:  # each bucket as the collector windows it, and 17 minutes at an arbitrary instant
        end = hour + timedelta(hours=1)
        sent += [(_query(q, r="3600000ms", xid=xid, clock=clock, device=device), end - timedelta(milliseconds=1))
                 for q in FINDINGS_QUERIES]
        sent += [(_query(q, r="17m", xid=xid, clock=clock, device=device), hour + timedelta(minutes=41))
                 for q in FINDINGS_QUERIES]
        hour = end
    nonempty = _compare(real, simulated, sent)
    assert nonempty > len(sent) // 2
    # the events are there: XID 48 for one sample (max_over_time sees it, last_over_time at the end does not), 79
    got = {}
    for at in (since + timedelta(hours=h) for h in range(1, 10)):
        for q in ("max_over_time({xid}[3600000ms])", "last_over_time({xid}[3600000ms])"):
            _code, body = _get(simulated.url, _query(q, xid=xid), at - timedelta(milliseconds=1))
            got[(q[:4], at)] = {float(r["value"][1]) for r in body["data"]["result"]} - {0.0}
    start = END - timedelta(days=DAYS)
    assert got[("max_", start + timedelta(hours=36))] == {48.0}
    assert got[("last", start + timedelta(hours=36))] == set()
    assert 79.0 in got[("max_", start + timedelta(hours=39))]  # beside a failed batch run's application XID 43


def _names(server) -> set[str]:
    with urllib.request.urlopen(server.url + "/api/v1/label/__name__/values", timeout=30) as response:
        return set(json.load(response)["data"])


# Of the kinds the collection of GPUs handed out by DRA and HAMi sends: series by claim, device and MIG device,
# and HAMi GPUs' device series (no pod).
DRA_QUERIES = [
    'avg_over_time(DCGM_FI_PROF_SM_ACTIVE{dra_claim_name!=""}[{r}])',
    'avg_over_time(DCGM_FI_PROF_SM_ACTIVE{exported_pod!="",dra_claim_name!=""}[{r}])',
    'sum by (dra_claim_namespace, dra_claim_name, dra_device_name) (avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE'
    '{dra_driver_name="gpu.nvidia.com"}[{r}]))',
    'avg_over_time(DCGM_FI_PROF_SM_ACTIVE{dra_mig_device_uuid=~"MIG-.+"}[{r}])',
    'max by (UUID, dra_pool_name) (avg_over_time(DCGM_FI_DEV_FB_USED{dra_pool_name!=""}[{r}]))',
    'avg_over_time(DCGM_FI_PROF_SM_ACTIVE{pod="",exported_pod="",Hostname=~"hami-.*|dra-.*"}[{r}])',
    'avg_over_time(DCGM_FI_PROF_SM_ACTIVE{pod="",exported_pod="",hostname=~"hami-.*|dra-.*"}[{r}])',
    "count by (Hostname, hostname) (last_over_time(DCGM_FI_DEV_FB_USED[{r}]))",
]


MIXED_HOURS = 12  # back to where the shared claim has its two consumers


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def mixed_pair(request):
    """(real Prometheus, simulated Prometheus) over the last hours of the mixed cluster (DRA, HAMi)."""
    real, simulated = _pair(END - timedelta(hours=MIXED_HOURS), END, VARIANTS[request.param],
                            scenario="mixed", days=3)
    yield real, simulated
    simulated.stop()
    real.close()


def test_dra_and_hami_series_answer_the_same(mixed_pair):
    real, simulated = mixed_pair
    sent = collector_queries(real.url)
    for h in range(MIXED_HOURS - 1, 0, -1):
        end = END - timedelta(hours=h - 1)
        sent += [(_query(q, r="3600000ms"), end - timedelta(milliseconds=1)) for q in DRA_QUERIES]
        sent += [(_query(q, r="17m"), end - timedelta(minutes=19)) for q in DRA_QUERIES]
    assert _compare(real, simulated, sent) > len(sent) // 2
    _code, body = _get(simulated.url, 'count(DCGM_FI_PROF_SM_ACTIVE{dra_claim_name="shared-h100"})', END -
                       timedelta(hours=9))
    assert float(body["data"]["result"][0]["value"][1]) == 2  # one series per consumer of the shared claim
