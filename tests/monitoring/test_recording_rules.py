"""The shipped recording rules load and pass their promtool unit tests, and record what the collector reads and the
simulator writes (tests/ingest/test_recording_rules.py: the same ledger with and without them)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from apps.ingest.collectors.promql import (
    CLOCK_EVENT_CANDIDATE,
    DEVICE_BY,
    HEALTH_RECORDED,
    HEALTH_RECORDED_FIELDS,
    RECORDED,
    RECORDED_HEARTBEAT,
    RECORDED_SIGNALS,
    SIGNAL_BY,
)
from devtools.simulator import exposition
from tests.monitoring.promtool import check_and_test_rules

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "monitoring" / "gpufinops-recording.yaml"
TESTS = REPO / "deploy" / "monitoring" / "gpufinops-recording.test.yaml"


def test_promtool_check_and_test_rules():
    check_and_test_rules(RULES, TESTS, rule_count=12)


def test_the_rules_record_what_the_collector_reads_and_the_simulator_writes():
    (group,) = yaml.safe_load(RULES.read_text())["groups"]
    heartbeat, *rules = group["rules"]
    assert heartbeat == {"record": RECORDED_HEARTBEAT, "expr": "vector(1)"}
    assert RECORDED_HEARTBEAT == exposition.RECORDED_HEARTBEAT
    signal_rules = [r for r in rules if r["record"] == RECORDED]
    health_rules = [r for r in rules if r["record"] == HEALTH_RECORDED]
    assert len(signal_rules) + len(health_rules) == len(rules)
    assert RECORDED == exposition.RECORDED
    recorded = {}
    for rule in signal_rules:
        # Both pod-label spellings, as the collector's raw query reads them, each kept per the same labels.
        (metric,) = set(re.findall(r"\b(DCGM_FI_\w+)\{", rule["expr"]))
        expr = rule["expr"]
        assert f'{metric}{{exported_pod!=""}}' in expr and f'{metric}{{pod!="",exported_pod=""}}' in expr
        by = re.findall(r"max by \(([^)]*)\)", expr)
        assert len(by) == 2 and {tuple(b.split(", ")) for b in by} == {exposition.RECORDED_BY}
        # The raw query keeps the same labels (`PrometheusSource._signal_query`).
        assert tuple(SIGNAL_BY.split(", ")) == exposition.RECORDED_BY
        recorded[rule["labels"]["signal"]] = metric
    assert recorded == RECORDED_SIGNALS
    assert {v: k for k, v in exposition.RECORDED_SIGNALS.items()} == RECORDED_SIGNALS


def test_the_health_rules_record_what_the_collector_reads_and_the_simulator_writes():
    """One recorded series per GPU (`max by` the collector's DEVICE_BY) and field, each field `or`-ing the raw
    metric's names the collector reads; the simulator writes the same fields from the same metrics."""
    (group,) = yaml.safe_load(RULES.read_text())["groups"]
    health = {}
    for rule in group["rules"]:
        if rule["record"] != HEALTH_RECORDED:
            continue
        metrics = re.findall(r"max by \(([^)]*)\) \((DCGM_FI_\w+)\)", rule["expr"])
        assert metrics and {by for by, _m in metrics} == {DEVICE_BY}
        field = rule["labels"]["field"]
        # Kept only where the field has something to report, by the filter the collector's query applies.
        kept = f">= {CLOCK_EVENT_CANDIDATE}" if field == "clock_events" else "> 0"
        either = " or ".join(f"max by ({DEVICE_BY}) ({m})" for _by, m in metrics)
        assert rule["expr"] == (f"({either}) {kept}" if len(metrics) > 1 else f"{either} {kept}")
        health[field] = tuple(m for _by, m in metrics)
    assert health == HEALTH_RECORDED_FIELDS
    # The simulator stores what these filters keep, and nothing below.
    assert exposition.HEALTH_RECORDED_FLOORS == {"clock_events": CLOCK_EVENT_CANDIDATE}
    for field in health:
        floor = CLOCK_EVENT_CANDIDATE if field == "clock_events" else 0
        assert exposition.health_recorded_kept(field, floor + 1)
        assert exposition.health_recorded_kept(field, floor) is (field == "clock_events")
        assert not exposition.health_recorded_kept(field, floor - 1)
    assert HEALTH_RECORDED == exposition.HEALTH_RECORDED
    assert {m: f for f, ms in HEALTH_RECORDED_FIELDS.items() for m in ms} == exposition.HEALTH_RECORDED_FIELDS
    assert ", ".join(exposition.HEALTH_RECORDED_BY) == DEVICE_BY
