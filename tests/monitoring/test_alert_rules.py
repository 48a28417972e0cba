"""The shipped alert rules load, pass their promtool unit tests, and the PrometheusRule carries the same groups."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.monitoring.promtool import check_and_test_rules

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "monitoring" / "gpufinops-rules.yaml"
TESTS = REPO / "deploy" / "monitoring" / "gpufinops-rules.test.yaml"
PROMETHEUS_RULE = REPO / "deploy" / "k8s" / "overlays" / "production" / "prometheusrule.yaml"


def test_promtool_check_and_test_rules():
    check_and_test_rules(RULES, TESTS, rule_count=6)


def test_prometheus_rule_has_the_same_groups():
    groups = yaml.safe_load(RULES.read_text())["groups"]
    rule = yaml.safe_load(PROMETHEUS_RULE.read_text())
    assert rule["kind"] == "PrometheusRule" and rule["spec"]["groups"] == groups


def test_every_alert_is_tested_and_has_a_runbook():
    groups = yaml.safe_load(RULES.read_text())["groups"]
    alerts = {r["alert"] for g in groups for r in g["rules"]}
    assert alerts == {"GpufinopsMetricsAbsent", "GpufinopsCollectorSilent", "GpufinopsLedgerLagging",
                      "GpufinopsBucketsFailing", "GpufinopsBucketsAbandoned", "GpufinopsDefaultSignalMissing"}
    tests = yaml.safe_load(TESTS.read_text())["tests"]
    firing = {t["alertname"] for case in tests for t in case["alert_rule_test"] if t["exp_alerts"]}
    assert firing == alerts
    operations = (REPO / "docs" / "operations.md").read_text()
    for g in groups:
        for r in g["rules"]:
            anchor = r["annotations"]["runbook"].split("#", 1)[1]
            assert f"### {r['alert']}" in operations and anchor == r["alert"].lower()
