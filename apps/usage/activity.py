"""Activity signals the ledger keeps side by side (ledger.md, "Activity")."""

from __future__ import annotations

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
