"""The savings' pure rules (no database): MIG profiles per model, the unit a pod holds, the smallest profile a
peak fits, right-sizing, the capability table and the move to a cheaper model, and the scaling to 30 days."""

from __future__ import annotations

from decimal import Decimal

import pytest

from apps.inventory.gpus import mig
from apps.inventory.gpus.capability import capability
from apps.savings.rules import Load, Offer, cheaper_model, per_month, right_size

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


@pytest.mark.parametrize(("model", "family", "mib", "tflops"), [
    (H100, "H100 SXM", 81559, 989), ("NVIDIA-H100-PCIe", "H100 PCIe", 81559, 756),
    ("NVIDIA-H100-NVL", "H100 NVL", 95830, 835), ("NVIDIA-H200", "H200", 143771, 989),
    (A100_80, "A100 80GB", 81920, 312), ("NVIDIA-A100-80GB-PCIe", "A100 80GB", 81920, 312),
    (A100_40, "A100 40GB", 40960, 312), ("NVIDIA-A30", "A30", 24576, 165),
    ("NVIDIA-L40S", "L40S", 46068, 362), ("NVIDIA-L40", "L40", 46068, 181), ("NVIDIA-L4", "L4", 23034, 121),
    ("NVIDIA-A10", "A10", 23028, 125), ("Tesla-T4", "T4", 15360, 65),
])
def test_the_capability_of_each_model(model, family, mib, tflops):
    c = capability(model)
    assert c is not None and (c.family, c.framebuffer_mib, c.dense_tflops) == (family, mib, tflops)


@pytest.mark.parametrize("model", ["NVIDIA-A10G", "NVIDIA-B200", "", "NVIDIA-L4X"])
def test_a_model_the_table_does_not_know(model):
    assert capability(model) is None


L4 = Offer("NVIDIA-L4", Decimal("0.80"), ("l4",))
L40S = Offer("NVIDIA-L40S", Decimal("1.50"), ("l40s",))
A100_OFFER = Offer(A100_80, Decimal("2.50"), ("a100",))
FLEET = [L4, L40S, A100_OFFER, Offer(H100, Decimal("4.00"), ("h100",))]
# A light service on a whole H100: 8 % busy (x 989 x 1.2 = 94.9 TFLOPS), 17,000 MiB (x 1.2 = 20,400 MiB).
LIGHT = Load(H100, "nvidia.com/gpu=1", 1.0, 0.08, 17000, 24)


def test_a_light_service_moves_to_the_cheapest_model_it_fits():
    move = cheaper_model(LIGHT, Decimal("4.00"), FLEET)
    assert move is not None
    assert (move.model, move.target_price, move.node_groups, move.saved_per_gpu_hour) == (
        "NVIDIA-L4", Decimal("0.80"), ("l4",), Decimal("3.20"))
    assert move.compute_needed_tflops == pytest.approx(0.08 * 989 * 1.2)
    assert move.memory_needed_mib == pytest.approx(20400)
    assert move.current.family == "H100 SXM" and move.target.family == "L4"


@pytest.mark.parametrize(("load", "offers", "target"), [
    # compute: 12 % of an H100 x 1.2 = 142 TFLOPS > an L4's 121: the next cheapest, an L40S
    (Load(H100, "nvidia.com/gpu=1", 1.0, 0.12, 17000, 24), FLEET, "NVIDIA-L40S"),
    # memory: 20,000 MiB x 1.2 = 24,000 > an L4's 23,034
    (Load(H100, "nvidia.com/gpu=1", 1.0, 0.08, 20000, 24), FLEET, "NVIDIA-L40S"),
    # 40 % of an H100 x 1.2 = 475 TFLOPS: more than an L40S (362), an A100 (312)
    (Load(H100, "nvidia.com/gpu=1", 1.0, 0.4, 17000, 24), FLEET, None),
    # the L4 not in the fleet (no node group): the L40S
    (LIGHT, [Offer("NVIDIA-L4", Decimal("0.80"), ()), L40S], "NVIDIA-L40S"),
    # no cheaper model on the price card
    (LIGHT, [Offer("NVIDIA-L4", Decimal("4.00"), ("l4",)), Offer("NVIDIA-L40S", Decimal("5"), ("l40s",))], None),
    # a model the capability table does not know is never a target
    (LIGHT, [Offer("NVIDIA-A10G", Decimal("0.50"), ("a10g",))], None),
    # equally priced: the one with more compute
    (LIGHT, [Offer("NVIDIA-L4", Decimal("1.50"), ("l4",)), L40S], "NVIDIA-L40S"),
    # an A100 80GB at 25 % (x 312 x 1.2 = 93.6 TFLOPS) and 17,000 MiB fits an L4
    (Load(A100_80, "nvidia.com/gpu=1", 1.0, 0.25, 17000, 24), FLEET, "NVIDIA-L4"),
])
def test_the_target_is_the_cheapest_fit_in_the_fleet(load, offers, target):
    price = {H100: Decimal("4.00"), A100_80: Decimal("2.50")}[load.gpu_model]
    move = cheaper_model(load, price, offers)
    assert (move.model if move else None) == target


@pytest.mark.parametrize(("load", "price"), [
    (Load(H100, "nvidia.com/gpu=1", 1.0, 0.08, 17000, 11), Decimal("4.00")),  # too few hours
    (Load(H100, "nvidia.com/gpu=2", 2.0, 0.08, 17000, 24), Decimal("4.00")),  # several GPUs per pod
    (Load(H100, "nvidia.com/gpu=1", 0.25, 0.08, 17000, 24), Decimal("4.00")),  # a time-sliced replica
    (Load(A100_80, "nvidia.com/mig-3g.40gb=1", 3 / 7, 0.08, 17000, 24), Decimal("2.50")),  # a MIG instance
    (Load("NVIDIA-A10G", "nvidia.com/gpu=1", 1.0, 0.08, 17000, 24), Decimal("1.00")),  # unknown model
    (LIGHT, None),  # its own model unpriced
    (Load("NVIDIA-L4", "nvidia.com/gpu=1", 1.0, 0.01, 1000, 24), Decimal("0.80")),  # already the cheapest
])
def test_no_move(load, price):
    assert cheaper_model(load, price, FLEET) is None
