"""Every query the collector sends answers the same from the simulated Prometheus as from a real one loaded
with the same history (`simulate export-openmetrics` + promtool): same series, same values to 1e-9."""

from __future__ import annotations

import contextlib
import inspect
import json
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


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def pair(request, tmp_path_factory):
    """(real Prometheus, simulated Prometheus) over the same hours of the demo, in one label variant."""
    from tests.harness.prometheus import start_prometheus as start_real

    require_binary("prometheus")
    require_binary("promtool")
    extra = VARIANTS[request.param]
    since = END - timedelta(hours=HOURS)
    path = tmp_path_factory.mktemp("om") / "history.om"
    call_command(
        "simulate", "export-openmetrics", "--scenario", "demo", "--since", since.isoformat(), "--until",
        END.isoformat(), "--end", END.isoformat(), "--days", str(DAYS), "--step", str(STEP), "--out", str(path), *extra,
    )
    real = start_real(path)
    real.wait_for("kube_node_labels", at=END.timestamp() - STEP, timeout=60)
    simulated = start_prometheus(
        build_scenario("demo", seed=0, end=END, days=DAYS), step=STEP, since=since.timestamp(),
        until=END.timestamp(), exported=bool(extra), hostname_label="hostname" if extra else "Hostname",
    )
    yield real, simulated
    simulated.stop()
    real.close()


def collector_queries(url: str) -> list[tuple[str, datetime]]:
    """The (PromQL, time) of every query the collector's MetricsSource methods send for each bucket of the
    window: full hours, a provisional (partial) hour, and a bucket reaching back before the history."""
    source = PrometheusSource(Cluster(name="compare", prometheus_url=url))
    sent: list[tuple[str, datetime]] = []
    send = source.query

    def record(promql: str, at: datetime):  # type: ignore[no-untyped-def]
        sent.append((promql, at))
        return send(promql, at)

    source.query = record  # type: ignore[method-assign]
    buckets = [(END - timedelta(hours=h), END - timedelta(hours=h - 1)) for h in range(HOURS - 1, 0, -1)]
    buckets += [(END - timedelta(hours=1), END - timedelta(minutes=37)),
                (END - timedelta(hours=HOURS + 1), END - timedelta(hours=HOURS))]
    methods = [name for name, fn in vars(MetricsSource).items() if inspect.isfunction(fn) and not name.startswith("_")]
    assert {"activity", "has_dcgm", "pod_history", "node_history", "namespace_labels"} <= set(methods)
    for start, end in buckets:
        for name in methods:
            params = list(inspect.signature(getattr(source, name)).parameters)
            assert params[:2] == ["start", "end"] and set(params[2:]) <= {"label_keys"}, (
                f"MetricsSource.{name}{params}: teach this test its arguments"
            )
            with contextlib.suppress(PrometheusError):  # a refused query is compared like the others
                getattr(source, name)(start, end, *([LABEL_KEYS] if "label_keys" in params else []))
    return sent


def _get(base: str, promql: str, at: datetime) -> tuple[int, dict]:
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": promql, "time": at.timestamp()})
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def _series(body: dict) -> dict:
    return {json.dumps(r["metric"], sort_keys=True): (r["value"][0], float(r["value"][1]))
            for r in body["data"]["result"]}


def test_every_collector_query_answers_the_same(pair):
    real, simulated = pair
    sent = collector_queries(real.url)
    assert len({q for q, _at in sent}) >= 15
    nonempty = 0
    for promql, at in sent:
        code_real, body_real = _get(real.url, promql, at)
        code_sim, body_sim = _get(simulated.url, promql, at)
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
    assert nonempty > len(sent) // 2
