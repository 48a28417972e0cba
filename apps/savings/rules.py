"""The savings' own arithmetic (docs/savings.md): a period's dollars per month, and whether a workload's peak load
fits a smaller MIG profile or a cheaper GPU model of the price card. Pure: plain data in, plain data out (the MIG
table is `apps.inventory.gpus.mig`, each model's framebuffer and compute `apps.inventory.gpus.capability`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

from apps.inventory.gpus import mig
from apps.inventory.gpus.capability import Capability, capability

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
    CHEAPER_MODEL = "cheaper_model"

    ALL = (STOP_IDLE, RIGHT_SIZE, RETURN_QUOTA, CHEAPER_MODEL)
    LABELS = {STOP_IDLE: "Stop or scale down", RIGHT_SIZE: "Right-size", RETURN_QUOTA: "Return borrowed quota",
              CHEAPER_MODEL: "Move to a cheaper GPU model"}


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


# The one unit a move to another model speaks of: one whole GPU per pod.
WHOLE_GPU = "nvidia.com/gpu=1"


@dataclass(frozen=True)
class Offer:
    """A GPU model a workload could move to: its price card price in force and the node groups of whole GPUs of it
    in the workload's cluster (empty: not in the fleet, so the move is not placeable)."""

    model: str
    usd_per_gpu_hour: Decimal
    node_groups: tuple[str, ...]


@dataclass(frozen=True)
class ModelMove:
    model: str  # the target model
    current: Capability
    target: Capability
    current_price: Decimal
    target_price: Decimal
    compute_needed_tflops: float  # peak activity x the current model's compute x (1 + headroom)
    memory_needed_mib: float  # peak framebuffer x (1 + headroom)
    node_groups: tuple[str, ...]

    @property
    def saved_per_gpu_hour(self) -> Decimal:
        return self.current_price - self.target_price


def cheaper_model(load: Load, price: Decimal | None, offers: list[Offer], headroom: float = HEADROOM,
                  min_hours: int = RIGHT_SIZE_MIN_HOURS) -> ModelMove | None:
    """The cheapest model of `offers` (priced below `price`, the workload's model's, and in the fleet) whose whole
    GPU holds the peak load plus `headroom`: peak activity x the current model's dense TFLOPS on compute, peak
    framebuffer on memory (`capability`); the most compute among equally priced ones. None otherwise (too few
    hours, not one whole GPU per pod, a model the capability table does not know, no price, nothing cheaper fits)."""
    if load.hours < min_hours or load.resources != WHOLE_GPU or not math.isclose(load.gpus, 1.0) or price is None:
        return None
    current = capability(load.gpu_model)
    if current is None:
        return None
    compute = load.peak_activity * current.dense_tflops * (1 + headroom)
    memory = load.peak_fb_mib * (1 + headroom)
    fits = []
    for offer in offers:
        target = capability(offer.model)
        if (offer.model == load.gpu_model or offer.usd_per_gpu_hour >= price or not offer.node_groups
                or target is None or target.dense_tflops < compute or target.framebuffer_mib < memory):
            continue
        fits.append((offer.usd_per_gpu_hour, -target.dense_tflops, offer.model, offer, target))
    if not fits:
        return None
    _, _, _, offer, target = min(fits, key=lambda f: f[:3])
    return ModelMove(offer.model, current, target, price, offer.usd_per_gpu_hour, compute, memory, offer.node_groups)
