"""When kube-state-metrics series were first and last seen in a bucket (PrometheusSource._seen), on a real
Prometheus: the cheap instant query at the bucket's edge plus subqueries for the rest give what one subquery
over every series gives (nodes and pods appearing, vanishing and coming back within the hour, at more than one
batch of names)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from apps.ingest.collectors import prometheus as collector
from apps.ingest.collectors.prometheus import PrometheusSource, window
from apps.inventory.models import Cluster
from apps.usage.inputs import EDGE_TOLERANCE
from apps.usage.sources import HISTORY_STEP_SECONDS
from tests.harness.prometheus import start_prometheus
from tests.harness.services import require_binary

pytestmark = pytest.mark.services

HOUR = datetime(2026, 11, 2, 10, tzinfo=UTC)
STEP = 30
# name -> the minutes (from HOUR, half-open spans) in which its series is scraped; the history starts 10 min early.
PRESENCE = {
    "always": [(-10, 70)],
    "late": [(20, 70)],                    # appears within the hour
    "gone": [(-10, 40)],                   # vanishes within the hour
    "blink": [(-10, 10), (30, 70)],        # gone for 20 minutes, back before the end
    "brief": [(15, 25)],                   # only inside the hour
    "before": [(-10, -6)],                 # only before the hour (not asked for)
    "edge": [(-10, 59.75)],                # last sample 15 s before the end: within the tolerance
}
# Enough pods that vanish within the hour for several batches of names in one matcher.
GONE_PODS = 7


def _spans() -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(metric, name) -> its presence spans: every PRESENCE case as a node and as a pod, plus pods that vanish."""
    out: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for name, spans in PRESENCE.items():
        out[("kube_node_labels", name)] = spans
        out[("kube_pod_start_time", f"pod-{name}")] = spans
    for i in range(GONE_PODS):
        out[("kube_pod_start_time", f"churn-{i:02d}")] = [(-10 + i, 5 + 7 * i)]
    return out


def _openmetrics() -> str:
    by_metric: dict[str, list[str]] = {"kube_node_labels": [], "kube_pod_start_time": []}
    for (metric, name), spans in _spans().items():
        label = f'node="{name}"' if metric == "kube_node_labels" else f'uid="{name}",namespace="ml",pod="{name}"'
        for a, b in spans:
            t = HOUR.timestamp() + a * 60
            while t < HOUR.timestamp() + b * 60:
                by_metric[metric].append(f"{metric}{{{label}}} 1 {t:.0f}")
                t += STEP
    lines = []
    for metric, samples in by_metric.items():
        lines += [f"# TYPE {metric} gauge", *samples]
    return "\n".join([*lines, "# EOF", ""])


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    require_binary("prometheus")
    require_binary("promtool")
    path = tmp_path_factory.mktemp("seen") / "seen.om"
    path.write_text(_openmetrics())
    server = start_prometheus(path)
    yield PrometheusSource(Cluster(name="seen", prometheus_url=server.url))
    server.close()


def _subquery(source: PrometheusSource, metric: str, by: str, fn: str, start: datetime, end: datetime):
    rng, at = window(start, end)
    q = f"{fn} by ({by}) ({fn}_over_time(timestamp({metric})[{rng}:{HISTORY_STEP_SECONDS}s]))"
    return {r["metric"][by]: float(r["value"][1]) for r in source.query(q, at)}


def _as_ledger_reads(fn: str, seen: dict[str, float], start: datetime, end: datetime) -> dict[str, datetime]:
    """Times as the ledger reads them (apps.usage.inputs): within EDGE_TOLERANCE of an edge is the edge."""
    out = {}
    for name, v in seen.items():
        t = datetime.fromtimestamp(v, tz=UTC)
        if fn == "min":
            out[name] = start if t <= start + EDGE_TOLERANCE else t
        else:
            out[name] = end if t >= end - EDGE_TOLERANCE else t
    return out


@pytest.mark.parametrize("end", [HOUR + timedelta(hours=1), HOUR + timedelta(minutes=37)], ids=["final", "partial"])
@pytest.mark.parametrize(("metric", "by", "prefix"), [("kube_node_labels", "node", ""),
                                                       ("kube_pod_start_time", "uid", "pod-")])
@pytest.mark.parametrize("fn", ["min", "max"])
def test_seen_equals_the_subquery_over_every_series(source, monkeypatch, fn, metric, by, prefix, end):
    monkeypatch.setattr(collector, "MAX_REGEX_NAMES", 2)  # several batches, and with churn the unrestricted path
    full = _subquery(source, metric, by, fn, HOUR, end)
    names = set(full) - {f"{prefix}before"}
    sent: list[str] = []
    query = source.query

    def record(promql, at):
        sent.append(promql)
        return query(promql, at)

    monkeypatch.setattr(source, "query", record)
    seen = source._seen(metric, by, fn, HOUR, end, names)
    assert _as_ledger_reads(fn, seen, HOUR, end) == _as_ledger_reads(fn, {n: full[n] for n in names}, HOUR, end)
    if fn == "max":  # the last sample exactly, not only as the ledger reads it
        assert seen == {n: full[n] for n in names}
    # Series present at the edge were answered without a subquery.
    assert sent[0].startswith(f"{fn} by ({by}) (timestamp(")
    assert all("=~" in q for q in sent[1:]) or len(sent) == 2


def test_the_hand_made_presence_reads_as_expected(source):
    end = HOUR + timedelta(hours=1)
    names = {n for n in PRESENCE if n != "before"}
    first = _as_ledger_reads("min", source._seen("kube_node_labels", "node", "min", HOUR, end, names), HOUR, end)
    last = _as_ledger_reads("max", source._seen("kube_node_labels", "node", "max", HOUR, end, names), HOUR, end)
    at = {m: HOUR + timedelta(minutes=m) for m in (10, 15, 20, 25, 40)}
    assert first == {"always": HOUR, "late": at[20], "gone": HOUR, "blink": HOUR, "brief": at[15], "edge": HOUR}
    step = timedelta(seconds=STEP)
    assert last == {"always": end, "late": end, "gone": at[40] - step, "blink": end, "brief": at[25] - step,
                    "edge": end}
