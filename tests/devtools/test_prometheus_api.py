"""The simulated Prometheus: its storage answers like raw samples would, and its HTTP API like Prometheus'."""

from __future__ import annotations

import json
import random
import urllib.error
import urllib.parse
import urllib.request
from datetime import timedelta

import pytest

from devtools.simulator.exposition import dcgm_rows, tsdb_ksm_rows
from devtools.simulator.prometheus_api import SimulatedTSDB, _Cache, start_prometheus
from devtools.simulator.promql import Evaluator, ListStorage
from tests.devtools.conftest import END
from tests.harness import cache

STEP = 60
HOURS = 2


@pytest.fixture(scope="module", params=["deletion", "health"])
def window(demo, request):
    """The hours around the demo's scratch pod's deletion while running (every kind of pod change), or those of
    its health events (an XID for one sample, counters stepping, a GPU vanishing, a rogue process, a straggler)."""
    if request.param == "health":
        return demo.t0 + 35 * 3600, demo.t0 + 39.5 * 3600
    dave = next(p for p in demo.pods if p.name == "scratch-dave")
    until = dave.deleted + 3600
    return until - HOURS * 3600, until


@pytest.fixture(scope="module")
def reference(demo, window):
    """Every sample of every series on the scrape grid, stored one by one: a pure function of the demo's fixed
    arguments, the window and the simulator's code, so cached on disk by content (tests/harness/cache.py)."""
    return cache.pickled("promql-reference", lambda: _reference(demo, window),
                         parts=["demo", "seed=0", END.isoformat(), repr(window), str(STEP)],
                         files=cache.source_files("devtools/simulator"))


def _reference(demo, window) -> Evaluator:
    since, until = window
    storage = ListStorage()
    t = since
    while t < until:
        for metric, labels, value in dcgm_rows(demo, t, scrape_labels=True, drop_empty=True):
            storage.add({"__name__": metric, **dict(labels)}, int(t * 1000), float(value))
        for metric, labels, value in tsdb_ksm_rows(demo, t):
            storage.add({"__name__": metric, **dict(labels)}, int(t * 1000), float(value))
        t += STEP
    return Evaluator(storage)


QUERIES = [
    'avg_over_time(DCGM_FI_PROF_SM_ACTIVE{exported_pod!=""}[{r}]) or '
    'avg_over_time(DCGM_FI_PROF_SM_ACTIVE{pod!="",exported_pod=""}[{r}])',
    "avg_over_time(DCGM_FI_DEV_GPU_UTIL[{r}])",
    "max_over_time(DCGM_FI_DEV_FB_USED[{r}])",
    "last_over_time(DCGM_FI_DEV_XID_ERRORS[{r}]) > 0",
    'count(last_over_time({__name__=~"DCGM_FI_PROF_SM_ACTIVE|DCGM_FI_PROF_GR_ENGINE_ACTIVE"}[{r}]))',
    "sum_over_time(DCGM_FI_DEV_POWER_USAGE[{r}])",
    "max_over_time(kube_pod_start_time[{r}])",
    "max by (uid) (max_over_time(kube_pod_completion_time[{r}]))",
    "max by (uid) (max_over_time(timestamp(kube_pod_start_time)[{r}:30s]))",
    'max_over_time(kube_pod_container_resource_requests{resource=~"nvidia_com_.*"}[{r}])',
    "count_over_time(kube_pod_deletion_timestamp[{r}])",
    "max_over_time(kube_pod_labels[{r}])",
    "max_over_time(kube_node_spec_unschedulable[{r}]) > 0",
    'min_over_time(kube_node_status_condition{condition="Ready",status="true"}[{r}]) < 1',
    "min_over_time(timestamp(kube_node_labels)[{r}:30s])",
    "max_over_time(timestamp(kube_node_labels)[{r}:1m])",
    "count by (phase) (kube_pod_status_phase == 1)",
    "timestamp(kube_pod_info)",
    "max_over_time(kube_replicaset_owner[{r}])",
    'max_over_time(kube_job_owner{owner_is_controller="true"}[{r}])',
    "max_over_time(DCGM_FI_DEV_XID_ERRORS[{r}]) > 0",
    "max_over_time(DCGM_FI_DEV_CLOCKS_EVENT_REASONS[{r}])",
    "max_over_time(DCGM_FI_DEV_POWER_VIOLATION[{r}]) - min_over_time(DCGM_FI_DEV_POWER_VIOLATION[{r}])",
    "(max_over_time(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[{r}]) - min_over_time(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[{r}])) > 0",
    "max by (UUID) (max_over_time(DCGM_FI_DEV_ROW_REMAP_FAILURE[{r}]))",
    'avg_over_time(DCGM_FI_DEV_FB_USED{pod!=""}[{r}]) / 1024',
    'avg_over_time(DCGM_FI_PROF_SM_ACTIVE{pod=""}[{r}]) > 0.05',
    "count by (Hostname) (last_over_time(DCGM_FI_PROF_SM_ACTIVE[{r}]))",
    "max by (UUID) (max_over_time(timestamp(DCGM_FI_DEV_FB_USED)[{r}:30s]))",
    "avg_over_time(DCGM_FI_DEV_FB_USED[{r}]) / (avg_over_time(DCGM_FI_DEV_FB_USED[{r}]) + "
    "avg_over_time(DCGM_FI_DEV_FB_FREE[{r}]))",
]


def _answer(ev: Evaluator, query: str, t: int) -> dict:
    return {s.key: s.value for s in ev.query(query, t)[1]}


def test_its_states_and_runs_answer_like_every_sample_stored(demo, window, reference):
    since, until = window
    tsdb = Evaluator(SimulatedTSDB(demo, step=STEP, since=since, until=until))
    rng = random.Random(7)
    checked = 0
    for query in QUERIES:
        for _ in range(4):
            at = int(rng.uniform(since + 600, until + 120) * 1000)
            at = at - at % 60_000 - 1 if rng.random() < 0.5 else at  # a bucket end (window()) or anywhere
            for rng_ in ("3600000ms", "17m", "1h"):
                q = query.replace("{r}", rng_)
                expected, got = _answer(reference, q, at), _answer(tsdb, q, at)
                assert got.keys() == expected.keys(), q
                for key, value in expected.items():
                    assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-12), (q, key)
                checked += bool(expected)
    assert checked > 100


def test_it_serves_the_state_at_change_points_between_scrapes(demo):
    dave = next(p for p in demo.pods if p.name == "scratch-dave")
    tsdb = Evaluator(SimulatedTSDB(demo, step=30))  # a scrape lands 30 s before the deletion
    shown = _answer(tsdb, 'kube_pod_deletion_timestamp{pod="scratch-dave"}', int(dave.deleted * 1000))
    assert list(shown.values()) == [dave.deleted]
    assert _answer(tsdb, 'kube_pod_info{pod="scratch-dave"}', int(dave.deleted * 1000) + 301_000) == {}


@pytest.fixture(scope="module")
def prometheus(demo):
    server = start_prometheus(demo, step=STEP)
    yield server
    server.stop()


def _http(server, query: str | None, at=None, post: bool = False) -> tuple[int, dict]:
    params = {k: v for k, v in (("query", query), ("time", at)) if v is not None}
    data = urllib.parse.urlencode(params)
    url = server.url + "/api/v1/query" + ("" if post else "?" + data)
    try:
        with urllib.request.urlopen(url, data=data.encode() if post else None, timeout=10) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


@pytest.mark.parametrize("post", [False, True])
def test_it_answers_the_query_api_over_get_and_post(prometheus, demo, post):
    at = (demo.end - timedelta(minutes=30)).timestamp()
    code, body = _http(prometheus, 'max_over_time(kube_node_labels{node="a100-0"}[1h])', repr(at), post)
    assert code == 200 and body["status"] == "success"
    assert body["data"]["resultType"] == "vector"
    [series] = body["data"]["result"]
    assert series["metric"]["label_cloud_google_com_gke_nodepool"] == "a100-pool"
    assert "__name__" not in series["metric"]
    assert series["value"] == [at, "1"]
    code, body = _http(prometheus, "kube_node_created", demo.end.isoformat().replace("+00:00", "Z"), post)
    assert code == 200 and len(body["data"]["result"]) == len(demo.nodes)
    assert _http(prometheus, "42", "1795000000.5", post)[1]["data"] == {"resultType": "scalar",
                                                                   "result": [1795000000.5, "42"]}


@pytest.mark.parametrize(
    ("query", "at", "code", "error_type"),
    [
        ("rate(kube_pod_info[5m])", "1795000000", 400, "bad_data"),
        ("kube_pod_info ^ 2", "1795000000", 400, "bad_data"),
        ("kube_pod_info - on(uid) kube_pod_owner", "1795000000", 400, "bad_data"),
        ('kube_node_created - {__name__=~"kube_node_created|kube_node_spec_unschedulable"}', "1795900000", 422,
         "execution"),
        (None, "1795000000", 400, "bad_data"),
        ("kube_pod_info", "yesterday", 400, "bad_data"),
        ('count_over_time({__name__=~"DCGM_FI_PROF_SM_ACTIVE|DCGM_FI_PROF_GR_ENGINE_ACTIVE"}[5m])', "1795900000", 422,
         "execution"),
    ],
)
def test_it_refuses_with_prometheus_errors(prometheus, query, at, code, error_type):
    status, body = _http(prometheus, query, at)
    assert (status, body["status"], body["errorType"]) == (code, "error", error_type)
    assert body["error"]


def test_it_answers_readiness_and_404(prometheus):
    with urllib.request.urlopen(prometheus.url + "/-/ready", timeout=5) as r:
        assert r.status == 200
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(prometheus.url + "/api/v1/query_range", timeout=5)
    assert exc.value.code == 404


def test_it_keeps_the_answers_at_an_explicit_time_only(prometheus, demo):
    """A re-collection asks the same queries at the same times: the kept answer is the evaluated one."""
    at = repr((demo.end - timedelta(minutes=20)).timestamp())
    queries, kept = prometheus.queries, len(prometheus.answers.items)
    first = _http(prometheus, "kube_node_created", at)
    assert first[0] == 200 and len(first[1]["data"]["result"]) == len(demo.nodes)
    assert _http(prometheus, "kube_node_created", at, post=True) == first
    assert len(prometheus.answers.items) == kept + 1
    assert prometheus.queries == queries + 2  # both counted
    assert _http(prometheus, "kube_node_created")[0] == 200  # now's answer: not kept
    assert len(prometheus.answers.items) == kept + 1


def test_its_kept_answers_are_bounded_by_their_weight():
    kept = _Cache(8, weigh=len)
    for key in "abc":
        assert kept.get(key, lambda key=key: key * 4) == key * 4
    assert list(kept.items) == ["b", "c"] and kept.weight == 8
    assert kept.get("d", lambda: "d" * 20) == "d" * 20  # heavier than the bound: kept alone
    assert list(kept.items) == ["d"] and kept.weight == 20
