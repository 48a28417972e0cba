"""The savings' own arithmetic (docs/savings.md): a period's dollars per month, and whether a workload's peak load
fits a smaller MIG profile. Pure: plain data in, plain data out (the MIG table is `apps.inventory.gpus.mig`)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from apps.inventory.gpus import mig

DAYS_PER_MONTH = 30
HOURS_PER_MONTH = Decimal(24 * DAYS_PER_MONTH)
MICRO = Decimal("0.000001")
# Headroom over the peak a right-sized unit keeps, on compute and on framebuffer alike.
HEADROOM = 0.2
# Hours of measured activity and framebuffer a right-sizing rests on at the least (fewer: no item).
RIGHT_SIZE_MIN_HOURS = 12


class Action:
    STOP_IDLE = "stop_idle"
    RIGHT_SIZE = "right_size"
    RETURN_QUOTA = "return_quota"

    ALL = (STOP_IDLE, RIGHT_SIZE, RETURN_QUOTA)
    LABELS = {STOP_IDLE: "Stop or scale down", RIGHT_SIZE: "Right-size", RETURN_QUOTA: "Return borrowed quota"}


def per_month(amount: Decimal, period_hours: float) -> Decimal:
    """A period's dollars scaled to 30 days (the period repeats at the same rate)."""
    if period_hours <= 0:
        return Decimal(0)
    return (amount * HOURS_PER_MONTH / Decimal(str(period_hours))).quantize(MICRO)


@dataclass(frozen=True)
class Load:
    """What a workload held and the most it used, over the hours it was measured."""

    gpu_model: str
    resources: str  # the ledger's effective request, e.g. `nvidia.com/gpu=1` or `nvidia.com/mig-3g.40gb=1`
    gpus: float  # physical-GPU equivalents one pod held
    peak_activity: float  # the largest hourly activity of one pod, a share of the unit it holds
    peak_fb_mib: float  # the largest hourly framebuffer of one pod, MiB
    hours: int  # pod-hours with both measured


@dataclass(frozen=True)
class RightSize:
    current: str  # "whole GPU" or the profile held
    current_slices: int
    target: mig.MigProfile
    slices_needed: int
    memory_needed_mib: float

    @property
    def saved_share(self) -> Decimal:
        """The share of the charge a smaller unit saves: the ledger prices a MIG instance at its slices' share."""
        return Decimal(self.current_slices - self.target.slices) / Decimal(self.current_slices)


def right_size(load: Load, headroom: float = HEADROOM, min_hours: int = RIGHT_SIZE_MIN_HOURS) -> RightSize | None:
    """The smallest MIG profile of the model that holds the peak activity and framebuffer plus `headroom`, when it
    is smaller than what the workload holds; None otherwise (too few hours, not one GPU or one instance, a model
    without MIG, or nothing smaller fits)."""
    if load.hours < min_hours:
        return None
    current = mig.unit_slices(load.gpu_model, load.resources, load.gpus)
    if current is None or not mig.mig_profiles(load.gpu_model):
        return None
    needed = mig.slices_needed(load.peak_activity, current, load.gpu_model, headroom)
    memory = load.peak_fb_mib * (1 + headroom)
    target = mig.smallest_fit(load.gpu_model, slices_needed=needed, memory_mib=memory)
    if target is None or target.slices >= current:
        return None
    name = load.resources.split("=")[0].removeprefix("nvidia.com/mig-")
    return RightSize("whole GPU" if name == "nvidia.com/gpu" else name, current, target, needed, memory)
