"""Activity signals the ledger keeps side by side (ledger.md, "Activity")."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

SIGNALS: tuple[str, ...] = ("sm_active", "gr_engine_active", "tensor_active", "gpu_util")


def default_signal() -> str:
    """The signal shown unless another is asked for: `GPUFINOPS_DEFAULT_SIGNAL` (a system check refuses an
    unknown one). Read at each call, so a changed setting takes effect without a code change."""
    return settings.GPUFINOPS_DEFAULT_SIGNAL

# Default DCGM metric per signal; a cluster may override them (Cluster.metric_names).
DEFAULT_METRICS: dict[str, str] = {
    "sm_active": "DCGM_FI_PROF_SM_ACTIVE",
    "gr_engine_active": "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "tensor_active": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "gpu_util": "DCGM_FI_DEV_GPU_UTIL",
}
# GPU_UTIL is a percentage; the ledger's activity is a ratio.
SIGNAL_SCALE: dict[str, float] = {"gpu_util": 0.01}

# ---- The fix for a signal the exporter does not send (issue 25) ----
# dcgm-exporter's stock lists (default-counters.csv, dcp-metrics-included.csv) and the GPU Operator's built-in one
# ship DCGM_FI_PROF_SM_ACTIVE commented out. Enabling it takes a *custom metrics list*: the standalone chart's
# `customMetrics` (the complete list: it replaces the default, it does not add to it) or, with the GPU Operator, the
# ConfigMap named by `dcgmExporter.config.name` under the key `dcgm-metrics.csv`. Pointing the exporter at
# dcp-metrics-included.csv is no fix: SM_ACTIVE is commented out there too. deploy/dcgm-exporter/ ships the full
# list (dcgm-metrics.csv, the same lines; a test keeps them equal).
METRIC_LINES: dict[str, str] = {
    "DCGM_FI_PROF_SM_ACTIVE":
        "DCGM_FI_PROF_SM_ACTIVE,          gauge, The ratio of cycles an SM has at least 1 warp assigned (0 to 1).",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE":
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE,   gauge, Ratio of time the graphics engine is active (0 to 1).",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE":
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, gauge, Ratio of cycles the tensor (HMMA) pipe is active (0 to 1).",
    "DCGM_FI_DEV_GPU_UTIL": "DCGM_FI_DEV_GPU_UTIL,            gauge, GPU utilization (in %).",
}
CHART_PLACE = "dcgm-exporter Helm chart: `customMetrics` in its values (the complete list, not additive)"
OPERATOR_PLACE = ("GPU Operator: the ConfigMap named by `dcgmExporter.config.name`, key `dcgm-metrics.csv` "
                  "(deploy/dcgm-exporter/configmap-gpu-operator.yaml)")


@dataclass(frozen=True)
class MetricsFix:
    """How to make dcgm-exporter send `metric`: the line to add to its metrics list, and where that list is."""

    metric: str
    line: str
    chart: str = CHART_PLACE
    operator: str = OPERATOR_PLACE

    def __str__(self) -> str:
        return f"add `{self.line}` to the exporter's custom metrics list ({self.chart}; or {self.operator})"


def metrics_fix(metric: str) -> MetricsFix:
    """The fix for a missing DCGM field (a renamed metric of a cluster gets a line of the same shape)."""
    line = METRIC_LINES.get(metric) or f"{metric}, gauge, (the field's help text)."
    return MetricsFix(metric, " ".join(line.split()))
