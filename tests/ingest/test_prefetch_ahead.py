"""A bucket's round of Prometheus queries started ahead (`PrometheusSource.prefetch_ahead`, while the collector reads
Kubernetes) gives what the round asked in place gives, asks nothing twice, fails where it failed, and leaves no
thread behind."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from apps.ingest.collectors.prometheus import PrometheusError, PrometheusSource
from tests.ingest.conftest import make_cluster

LABEL_KEYS = ("team",)


def prometheus_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("prometheus")]


def recording(source: PrometheusSource) -> list[str]:
    """Every query `source` sends, in a list (the round's threads included)."""
    sent: list[str] = []
    send = source.ask

    def ask(promql, at):  # type: ignore[no-untyped-def]
        sent.append(promql)
        return send(promql, at)

    source.ask = ask  # type: ignore[method-assign]
    return sent


def read_bucket(source: PrometheusSource, start, end) -> list:  # type: ignore[no-untyped-def]
    """What the ledger and the findings read of one bucket, in their order."""
    return [
        source.pod_history(start, end, LABEL_KEYS), source.namespace_labels(start, end, LABEL_KEYS),
        source.owner_history(start, end), source.node_history(start, end, LABEL_KEYS), source.activity(start, end),
        source.has_dcgm(start, end), source.device_health(start, end), source.vanished_devices(start, end),
        source.pod_memory(start, end),
    ]


@pytest.mark.django_db
def test_a_round_asked_ahead_is_the_round_asked_in_place(sim_world):
    start = sim_world.hours[-1]
    end = start + timedelta(hours=1)
    ahead, in_place = (PrometheusSource(make_cluster(sim_world, name=n)) for n in ("ahead", "in-place"))
    sent_ahead, sent_in_place = recording(ahead), recording(in_place)
    ahead.prefetch_ahead(start, end)
    assert read_bucket(ahead, start, end) == read_bucket(in_place, start, end)
    assert sorted(sent_ahead) == sorted(sent_in_place)  # the answers asked ahead were used, none asked again
    assert len(sent_ahead) == ahead.queries > 20
    assert not prometheus_threads()


@pytest.mark.django_db
def test_a_round_ahead_that_fails_fails_in_the_bucket_as_it_did(sim_world):
    start = sim_world.hours[-1]
    end = start + timedelta(hours=1)
    ahead, in_place = (PrometheusSource(make_cluster(sim_world, name=n)) for n in ("ahead", "in-place"))
    sim_world.prometheus.stop()
    try:
        ahead.prefetch_ahead(start, end)
        errors = []
        for source in (ahead, in_place):
            with pytest.raises(PrometheusError) as raised:
                source.pod_history(start, end, LABEL_KEYS)
            errors.append(str(raised.value))
    finally:
        sim_world.prometheus.start()
    assert all(e.startswith("Prometheus query failed (ConnectionError)") for e in errors), errors
    assert not prometheus_threads()
    # Nothing of the failed round is kept: with Prometheus back, the bucket reads what a fresh source reads.
    assert read_bucket(ahead, start, end) == read_bucket(PrometheusSource(make_cluster(sim_world, name="fresh")),
                                                         start, end)


@pytest.mark.django_db
def test_a_round_stopped_ahead_leaves_no_thread_and_no_answers(sim_world):
    start = sim_world.hours[-1]
    end = start + timedelta(hours=1)
    source = PrometheusSource(make_cluster(sim_world, name="stopped"))
    sent = recording(source)
    source.prefetch_ahead(start, end)
    source.stop_ahead()
    assert not prometheus_threads()
    asked_ahead = len(sent)
    source.prefetch(start, end)  # the stopped round's answers were dropped: the whole round is asked again
    assert len(sent) - asked_ahead > 20


@pytest.mark.django_db
def test_the_ledger_reads_its_answers_while_the_findings_are_still_asked(sim_world):
    """The round ahead is waited for answer by answer: the ledger's reads return while the findings' health queries,
    later in the round, are held back (here until the ledger has read everything), and every answer is the one the
    round asked in place gives."""
    start = sim_world.hours[-1]
    end = start + timedelta(hours=1)
    source = PrometheusSource(make_cluster(sim_world, name="overlap"))
    health = {promql for promql, _at in source._health_queries(start, end)}
    ledger_read = threading.Event()
    released_by_the_ledger: list[bool] = []
    send = source.ask

    def ask(promql, at):  # type: ignore[no-untyped-def]
        if promql in health:  # held until the ledger has read its answers (a bound, never reached when it has)
            released_by_the_ledger.append(ledger_read.wait(30))
        return send(promql, at)

    source.ask = ask  # type: ignore[method-assign]
    source.prefetch_ahead(start, end)
    ledger = [source.pod_history(start, end, LABEL_KEYS), source.namespace_labels(start, end, LABEL_KEYS),
              source.owner_history(start, end), source.node_history(start, end, LABEL_KEYS),
              source.activity(start, end), source.has_dcgm(start, end)]
    ledger_read.set()
    findings = [source.device_health(start, end), source.vanished_devices(start, end), source.pod_memory(start, end)]
    source.stop_ahead()
    assert len(released_by_the_ledger) == len(health) and all(released_by_the_ledger)
    assert ledger + findings == read_bucket(PrometheusSource(make_cluster(sim_world, name="overlap-in-place")),
                                            start, end)
    assert not prometheus_threads()
