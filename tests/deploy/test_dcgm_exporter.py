"""deploy/dcgm-exporter: the counters file parses as dcgm-exporter parses it and holds every field gpufinops
reads, and the shipped ConfigMaps carry exactly that file."""

from __future__ import annotations

import csv
import io

import yaml

from tests.deploy.conftest import REPO

DCGM = REPO / "deploy" / "dcgm-exporter"
REQUIRED = {
    # activity (apps/usage/activity.py DEFAULT_METRICS) and memory
    "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED",
    # health
    "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_DEV_THERMAL_VIOLATION",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
}
CLOCK_REASONS = ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")  # field 112, renamed


def records(text: str) -> list[list[str]]:
    """As dcgm-exporter reads it (Go encoding/csv, Comment '#', fields trimmed, exactly 3 per record)."""
    out = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        assert '"' not in line, f"a quote breaks Go's csv reader: {line}"
        (row,) = list(csv.reader(io.StringIO(line)))
        assert len(row) == 3, f"expected 3 fields: {line}"
        out.append([f.strip() for f in row])
    return out


def test_counters_file_parses_and_has_every_needed_field():
    from apps.usage.activity import DEFAULT_METRICS

    text = (DCGM / "dcgm-metrics.csv").read_text()
    rows = records(text)
    names = [r[0] for r in rows]
    assert len(names) == len(set(names)), "duplicate field"
    for name, kind, help_text in rows:
        assert name.startswith("DCGM_FI_"), name
        assert kind in {"gauge", "counter", "label"}, (name, kind)
        assert help_text, name
    assert set(names) >= REQUIRED
    assert set(names) >= set(DEFAULT_METRICS.values())
    # Both spellings of the clock-event field are there, exactly one active: an exporter that does not know a
    # name refuses to start, so the other stays a comment to swap in.
    active = [n for n in CLOCK_REASONS if n in names]
    assert active == [CLOCK_REASONS[0]]
    assert "# DCGM_FI_DEV_CLOCK_THROTTLE_REASONS, gauge," in text


def test_configmaps_carry_the_counters_file():
    text = (DCGM / "dcgm-metrics.csv").read_text()
    operator = yaml.safe_load((DCGM / "configmap-gpu-operator.yaml").read_text())
    chart = yaml.safe_load((DCGM / "configmap-dcgm-exporter-chart.yaml").read_text())
    assert operator["data"] == {"dcgm-metrics.csv": text}  # the key the GPU Operator mounts
    assert chart["data"] == {"metrics": text}
    values = yaml.safe_load((DCGM / "values-dcgm-exporter.yaml").read_text())
    (mount,) = values["extraVolumeMounts"]
    assert values["arguments"] == ["-f", mount["mountPath"]] and mount["subPath"] == "metrics"
    assert values["extraConfigMapVolumes"][0]["configMap"]["name"] == chart["metadata"]["name"]
    assert values["serviceMonitor"]["honorLabels"] is True
    op_values = yaml.safe_load((DCGM / "values-gpu-operator.yaml").read_text())
    assert op_values["dcgmExporter"]["config"]["name"] == operator["metadata"]["name"]


def test_the_charts_custom_metrics_value_carries_the_counters_file():
    text = (DCGM / "dcgm-metrics.csv").read_text()
    values = yaml.safe_load((DCGM / "values-dcgm-exporter-custom-metrics.yaml").read_text())
    assert values == {"customMetrics": text}  # the complete list: customMetrics replaces the default one


def test_the_fix_the_product_prints_is_the_shipped_line():
    """The missing_signal finding, the data-status page and check_cluster print `metrics_fix(metric).line`: the
    very line of the shipped list (apps/usage/activity.py keeps a copy; the image has no deploy/)."""
    from apps.usage.activity import DEFAULT_METRICS, METRIC_LINES, metrics_fix

    text = (DCGM / "dcgm-metrics.csv").read_text()
    assert set(METRIC_LINES) == set(DEFAULT_METRICS.values())
    for metric, line in METRIC_LINES.items():
        assert line in text.splitlines(), metric
        fix = metrics_fix(metric)
        assert records(fix.line) == records(line)  # the same record, spaces folded
        assert "customMetrics" in fix.chart and "dcgm-metrics.csv" in fix.operator
