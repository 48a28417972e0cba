"""The savings' pure rules (no database): MIG profiles per model, the unit a pod holds, the smallest profile a
peak fits, right-sizing and the scaling to 30 days."""

from __future__ import annotations

from decimal import Decimal

import pytest

from apps.inventory.gpus import mig
from apps.savings.rules import Load, per_month, right_size

H100 = "NVIDIA-H100-80GB-HBM3"
A100_80 = "NVIDIA-A100-SXM4-80GB"
A100_40 = "NVIDIA-A100-SXM4-40GB"


@pytest.mark.parametrize(("model", "names"), [
    (H100, ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]),
    (A100_80, ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]),
    (A100_40, ["1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"]),
    ("NVIDIA-H200", ["1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"]),
    ("NVIDIA-A30", ["1g.6gb", "2g.12gb", "4g.24gb"]),
    ("NVIDIA-L4", []),
    ("", []),
])
def test_profiles_of_each_model(model, names):
    assert [p.name for p in mig.mig_profiles(model)] == names


@pytest.mark.parametrize(("model", "resources", "gpus", "slices"), [
    (H100, "nvidia.com/gpu=1", 1.0, 7),
    ("NVIDIA-A30", "nvidia.com/gpu=1", 1.0, 4),
    (A100_80, "nvidia.com/mig-3g.40gb=1", 3 / 7, 3),
    (H100, "nvidia.com/gpu=2", 2.0, None),  # several GPUs: not one unit
    (H100, "nvidia.com/mig-1g.10gb=2", 2 / 7, None),
    (H100, "nvidia.com/gpu=1", 0.25, None),  # a time-sliced replica
    (H100, "nvidia.com/gpu=1,nvidia.com/mig-1g.10gb=1", 1.1, None),
])
def test_the_unit_a_pod_holds(model, resources, gpus, slices):
    assert mig.unit_slices(model, resources, gpus) == slices


def test_smallest_fit_takes_fewest_slices_then_least_memory():
    assert mig.smallest_fit(H100, slices_needed=1, memory_mib=5000).name == "1g.10gb"
    assert mig.smallest_fit(H100, slices_needed=1, memory_mib=9800).name == "1g.20gb"  # 9,728 MiB usable of 10 GB
    assert mig.smallest_fit(H100, slices_needed=2, memory_mib=21000).name == "3g.40gb"
    assert mig.smallest_fit(H100, slices_needed=5, memory_mib=1).name == "7g.80gb"
    assert mig.smallest_fit(H100, slices_needed=1, memory_mib=80 * 1024) is None
    assert mig.smallest_fit("NVIDIA-L4", slices_needed=1, memory_mib=1) is None


@pytest.mark.parametrize(("activity", "current", "needed"), [
    (0.0, 7, 1), (0.1, 7, 1), (0.12, 7, 2), (0.2, 7, 2), (0.5, 7, 5), (1.0, 7, 9),  # 9: more than the GPU
    (0.25, 3, 1), (0.6, 3, 3),
])
def test_slices_needed_with_headroom(activity, current, needed):
    assert mig.slices_needed(activity, current, H100, 0.2) == needed


def test_right_size_a_light_service_on_a_whole_gpu_and_on_an_instance():
    whole = right_size(Load(H100, "nvidia.com/gpu=1", 1.0, 0.2, 15000, 24))
    assert whole is not None
    assert (whole.current, whole.target.name, whole.saved_share) == ("whole GPU", "2g.20gb", Decimal(5) / 7)
    instance = right_size(Load(A100_80, "nvidia.com/mig-3g.40gb=1", 3 / 7, 0.25, 9600, 24))
    assert instance is not None
    assert (instance.current, instance.target.name) == ("3g.40gb", "1g.20gb")


@pytest.mark.parametrize("load", [
    Load(H100, "nvidia.com/gpu=1", 1.0, 0.8, 15000, 24),  # busy
    Load(H100, "nvidia.com/gpu=1", 1.0, 0.1, 60000, 24),  # memory needs the whole GPU
    Load(H100, "nvidia.com/gpu=1", 1.0, 0.1, 1000, 11),  # too few hours
    Load("NVIDIA-L4", "nvidia.com/gpu=1", 1.0, 0.1, 1000, 24),  # no MIG
    Load(H100, "nvidia.com/mig-1g.10gb=1", 1 / 7, 0.1, 1000, 24),  # nothing smaller
    Load(H100, "nvidia.com/gpu=4", 4.0, 0.1, 1000, 24),
])
def test_no_right_size(load):
    assert right_size(load) is None


def test_per_month_scales_the_period_to_30_days():
    assert per_month(Decimal("10"), 24) == Decimal("300.000000")
    assert per_month(Decimal("7"), 168) == Decimal("30.000000")
    assert per_month(Decimal("7"), 0) == 0
