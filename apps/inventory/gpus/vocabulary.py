"""The words every way of handing out GPUs shares: node sharing modes, unit kinds, allocation modes, MIG
compute slices and the GPU model's name form.

The device plugin, DRA and HAMi rules (siblings of this module) all speak it, so a MIG instance is worth the
same share whether a device plugin or a ResourceClaim handed it out, and a GPU model is the same price key
whether GPU Feature Discovery, a ResourceSlice or HAMi named it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from enum import StrEnum

# ---- Sharing modes of a node's GPUs (GpuNode.sharing) ----

WHOLE = "none"
TIME_SLICING = "time-slicing"
MPS = "mps"
MIG_MIXED = "mig-mixed"
MIG_SINGLE = "mig-single"
REPLICATED = (TIME_SLICING, MPS)
# A node whose GPUs a DRA driver publishes in ResourceSlices, and a node whose GPUs HAMi splits into
# fractions: neither hands GPUs out as device-plugin units, so neither is ever "zero allocatable".
DRA_CLAIMS = "dra"
HAMI_FRACTIONS = "hami"
NOT_DEVICE_PLUGIN = (DRA_CLAIMS, HAMI_FRACTIONS)

# ---- Unit kinds: what one held unit is ----

# A whole GPU, a time-sliced/MPS replica, a MIG instance of a profile ("mig-" + profile, e.g.
# "mig-1g.10gb"), or a HAMi fraction of a GPU (cores and/or memory). A replica and a fraction are measured by
# the physical GPU's series; a whole GPU and a MIG instance by their own device's series.
UNIT_GPU = "gpu"
UNIT_REPLICA = "replica"
UNIT_MIG_PREFIX = "mig-"
UNIT_FRACTION = "fraction"

# ---- MIG compute slices ----

# MIG compute slices of one GPU: 7 on A100, H100, H200, B200; 4 on A30 (ledger.md "Allocation").
DEFAULT_COMPUTE_SLICES = 7
_FOUR_SLICE_MODELS = ("A30",)

_PROFILE = re.compile(r"^(\d+)g\.")


def profile_slices(profile: str) -> int | None:
    """Compute slices of a MIG profile: the N of `<N>g.<M>gb` (also of a DCGM `GPU_I_PROFILE`)."""
    match = _PROFILE.match(profile or "")
    return int(match.group(1)) if match else None


def compute_slices(model: str) -> int:
    """MIG compute slices of a whole GPU of this model."""
    return 4 if any(m in model.upper() for m in _FOUR_SLICE_MODELS) else DEFAULT_COMPUTE_SLICES


def mig_unit(profile: str) -> str:
    """The unit kind of a MIG instance of `profile`."""
    return UNIT_MIG_PREFIX + profile


# ---- GPU model names ----


def model_from_product_name(name: str) -> str:
    """The GPU model (and price key) of an NVML product name, in the form GPU Feature Discovery gives its
    `nvidia.com/gpu.product` label: words joined by `-` (`NVIDIA A100 80GB PCIe` -> `NVIDIA-A100-80GB-PCIe`),
    so one price card serves device-plugin, DRA and HAMi nodes alike."""
    return "-".join(name.split())


# ---- Allocation modes (interfaces.md: a pod row's `allocation_mode`) ----


class AllocationMode(StrEnum):
    DEVICE_PLUGIN = "device_plugin"
    TIME_SLICE = "time_slice"
    MIG = "mig"
    DRA = "dra"
    HAMI = "hami"


# When one pod holds units of several modes, the mode holding the largest share names it; ties go to the
# first of this order (the less common, more specific way wins, so a mixed pod is never hidden as plain).
_TIE_ORDER = (AllocationMode.DRA, AllocationMode.HAMI, AllocationMode.MIG, AllocationMode.TIME_SLICE,
              AllocationMode.DEVICE_PLUGIN)


def unit_mode(kind: str, *, from_claim: bool = False) -> AllocationMode:
    """How one unit was handed out: a ResourceClaim's device is `dra` whatever it is (whole GPU or MIG); a
    HAMi fraction `hami`; a replica `time_slice`; a MIG instance `mig`; a whole GPU `device_plugin`."""
    if from_claim:
        return AllocationMode.DRA
    if kind == UNIT_FRACTION:
        return AllocationMode.HAMI
    if kind == UNIT_REPLICA:
        return AllocationMode.TIME_SLICE
    if kind.startswith(UNIT_MIG_PREFIX):
        return AllocationMode.MIG
    return AllocationMode.DEVICE_PLUGIN


def pod_mode(units: Iterable[tuple[AllocationMode, float]]) -> AllocationMode:
    """A pod's allocation mode from its units' (mode, share): the mode holding the most of a GPU; a pod
    with no units is `device_plugin` (what it would have asked for)."""
    held: dict[AllocationMode, float] = defaultdict(float)
    for mode, share in units:
        held[mode] += share
    if not held:
        return AllocationMode.DEVICE_PLUGIN
    return max(_TIE_ORDER, key=lambda mode: (round(held.get(mode, -1.0), 9), -_TIE_ORDER.index(mode)))
