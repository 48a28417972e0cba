#!/usr/bin/env python3
"""Write the dcgm-exporter ConfigMaps from dcgm-metrics.csv (the one source); tests check they match.

    python deploy/dcgm-exporter/configmaps.py

* configmap-gpu-operator.yaml: for the NVIDIA GPU Operator. ClusterPolicy `spec.dcgmExporter.config.name`
  names it; the key must be `dcgm-metrics.csv` (the operator mounts it and points the exporter at it).
* configmap-dcgm-exporter-chart.yaml: for the standalone dcgm-exporter Helm chart, mounted over the file its
  `-f` argument reads (values-dcgm-exporter.yaml).
* values-dcgm-exporter-custom-metrics.yaml: the same list as the chart's own `customMetrics` value (the chart
  writes it into its metrics ConfigMap; the complete list, it replaces the default rather than adding to it).
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGETS = {
    "configmap-gpu-operator.yaml": ("dcgm-finops-metrics", "gpu-operator", "dcgm-metrics.csv"),
    "configmap-dcgm-exporter-chart.yaml": ("dcgm-finops-metrics", "dcgm-exporter", "metrics"),
}


def render(name: str, namespace: str, key: str, csv_text: str) -> str:
    body = "".join(f"    {line}\n" if line else "\n" for line in csv_text.rstrip("\n").split("\n"))
    return (
        "# Generated from dcgm-metrics.csv by configmaps.py: edit the CSV, then run the script.\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n"
        f"  name: {name}\n  namespace: {namespace}\n"
        "  labels:\n    app.kubernetes.io/part-of: gpufinops\n"
        f"data:\n  {key}: |\n{body}"
    )


def render_custom_metrics(csv_text: str) -> str:
    body = "".join(f"  {line}\n" if line else "\n" for line in csv_text.rstrip("\n").split("\n"))
    return (
        "# Generated from dcgm-metrics.csv by configmaps.py: edit the CSV, then run the script.\n"
        "# Standalone dcgm-exporter Helm chart values: its own customMetrics (the complete list; not additive).\n"
        "# Use this or values-dcgm-exporter.yaml with its ConfigMap, not both.\n"
        f"customMetrics: |\n{body}"
    )


def main() -> None:
    csv_text = (HERE / "dcgm-metrics.csv").read_text(encoding="utf-8")
    for filename, (name, namespace, key) in TARGETS.items():
        (HERE / filename).write_text(render(name, namespace, key, csv_text), encoding="utf-8")
    (HERE / "values-dcgm-exporter-custom-metrics.yaml").write_text(render_custom_metrics(csv_text), encoding="utf-8")


if __name__ == "__main__":
    main()
