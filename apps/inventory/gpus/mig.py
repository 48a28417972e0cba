"""MIG profiles of each MIG-capable GPU model, and the smallest profile a measured load fits (the savings'
right-sizing, docs/savings.md).

The table is NVIDIA's (GPU Operator `state-mig-manager` config, MIG user guide "Supported MIG Profiles"): `<N>g`
is N of the model's compute slices (`vocabulary.compute_slices`), `<M>gb` its framebuffer. What an instance
reports as framebuffer is a little under the nominal size (1g.10gb: 9,984 MiB of 10,240), so the usable memory
counted here is the nominal size x `USABLE_MEMORY`. Pure: plain data in, plain data out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from apps.inventory.gpus.vocabulary import compute_slices, profile_slices

MIB_PER_GB = 1024
USABLE_MEMORY = 0.95  # share of an instance's nominal framebuffer a process can use (rounded down)


@dataclass(frozen=True)
class MigProfile:
    name: str  # e.g. "2g.20gb"
    slices: int  # compute slices (of `compute_slices(model)`)
    memory_gb: int  # nominal framebuffer

    @property
    def memory_mib(self) -> float:
        """Usable framebuffer, MiB."""
        return self.memory_gb * MIB_PER_GB * USABLE_MEMORY


def _profiles(*rows: tuple[str, int, int]) -> tuple[MigProfile, ...]:
    return tuple(MigProfile(name, slices, gb) for name, slices, gb in rows)


_A100_40 = _profiles(("1g.5gb", 1, 5), ("1g.10gb", 1, 10), ("2g.10gb", 2, 10), ("3g.20gb", 3, 20),
                     ("4g.20gb", 4, 20), ("7g.40gb", 7, 40))
_80GB = _profiles(("1g.10gb", 1, 10), ("1g.20gb", 1, 20), ("2g.20gb", 2, 20), ("3g.40gb", 3, 40),
                  ("4g.40gb", 4, 40), ("7g.80gb", 7, 80))
_H200 = _profiles(("1g.18gb", 1, 18), ("1g.35gb", 1, 35), ("2g.35gb", 2, 35), ("3g.71gb", 3, 71),
                  ("4g.71gb", 4, 71), ("7g.141gb", 7, 141))
_A30 = _profiles(("1g.6gb", 1, 6), ("2g.12gb", 2, 12), ("4g.24gb", 4, 24))


def mig_profiles(model: str) -> tuple[MigProfile, ...]:
    """The MIG profiles of a GPU model (the ledger's model name, e.g. `NVIDIA-A100-SXM4-80GB`); () when the model
    has no MIG (L4, L40S, T4, ...) or is unknown."""
    name = model.upper()
    if "A30" in name:
        return _A30
    if "H200" in name:
        return _H200
    if "H100" in name or ("A100" in name and "80GB" in name):
        return _80GB
    if "A100" in name:
        return _A100_40
    return ()


def unit_slices(model: str, resources: str, gpus: float) -> int | None:
    """Compute slices one unit of a pod holds: a MIG instance's profile (`nvidia.com/mig-3g.40gb=1`), or every
    slice of one whole GPU (`nvidia.com/gpu=1`, one GPU held). None for anything else (several units, replicas,
    fractions, claims): right-sizing speaks of one GPU or one instance."""
    parts = [p for p in resources.split(",") if p]
    if len(parts) != 1 or "=" not in parts[0]:
        return None
    resource, count = parts[0].rsplit("=", 1)
    if count.strip() != "1":
        return None
    if resource.startswith("nvidia.com/mig-"):
        return profile_slices(resource.removeprefix("nvidia.com/mig-"))
    if resource == "nvidia.com/gpu" and math.isclose(gpus, 1.0):
        return compute_slices(model)
    return None


def smallest_fit(model: str, *, slices_needed: int, memory_mib: float) -> MigProfile | None:
    """The smallest profile (fewest slices, then least memory) with at least `slices_needed` compute slices and
    `memory_mib` of usable framebuffer; None when none fits or the model has no MIG."""
    fits = [p for p in mig_profiles(model) if p.slices >= slices_needed and p.memory_mib >= memory_mib]
    return min(fits, key=lambda p: (p.slices, p.memory_gb), default=None)


def slices_needed(activity: float, current_slices: int, model: str, headroom: float) -> int:
    """Compute slices a load needs: its peak activity on the unit it holds (a share of that unit's slices),
    as a share of the whole GPU, plus `headroom`, rounded up to whole slices (at least one)."""
    whole = compute_slices(model)
    share = activity * current_slices / whole * (1 + headroom)
    return max(1, math.ceil(round(share * whole, 9)))
