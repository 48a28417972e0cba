"""What every way of handing out GPUs shares (apps/inventory/gpus/vocabulary.py, intervals.py): allocation
modes, GPU model names, and the time sweep under shared claims and oversubscription."""

from __future__ import annotations

import pytest

from apps.inventory import gpus
from apps.inventory.gpus.intervals import Piece, covered, pieces
from apps.inventory.gpus.vocabulary import AllocationMode

# (unit kind, handed out by a claim, mode) -- interfaces.md `allocation_mode`
MODES = [
    (gpus.UNIT_GPU, False, "device_plugin"),
    (gpus.UNIT_REPLICA, False, "time_slice"),
    ("mig-1g.10gb", False, "mig"),
    (gpus.UNIT_GPU, True, "dra"),
    ("mig-1g.6gb", True, "dra"),
    (gpus.UNIT_FRACTION, False, "hami"),
]


@pytest.mark.parametrize(("kind", "from_claim", "mode"), MODES)
def test_unit_mode(kind: str, from_claim: bool, mode: str) -> None:
    assert gpus.unit_mode(kind, from_claim=from_claim) == mode


def test_the_mode_values_are_the_api_names() -> None:
    assert [m.value for m in AllocationMode] == ["device_plugin", "time_slice", "mig", "dra", "hami"]


# (units as (mode, share), the pod's mode)
POD_MODES = [
    ([], "device_plugin"),
    ([(AllocationMode.DEVICE_PLUGIN, 1.0)] * 2, "device_plugin"),
    ([(AllocationMode.DEVICE_PLUGIN, 1.0), (AllocationMode.DRA, 3 / 7)], "device_plugin"),
    ([(AllocationMode.DEVICE_PLUGIN, 1.0), (AllocationMode.DRA, 1.0)], "dra"),  # a tie: the rarer way names it
    ([(AllocationMode.MIG, 1 / 7)] * 7 + [(AllocationMode.TIME_SLICE, 1.0)], "mig"),  # 7 x 1/7 ties 1.0
    ([(AllocationMode.HAMI, 0.25)], "hami"),
]


@pytest.mark.parametrize(("units", "mode"), POD_MODES)
def test_pod_mode(units: list[tuple[AllocationMode, float]], mode: str) -> None:
    assert gpus.pod_mode(units) == mode


@pytest.mark.parametrize(("name", "model"), [
    ("NVIDIA A100 80GB PCIe", "NVIDIA-A100-80GB-PCIe"),
    ("NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3"),
    ("NVIDIA A100-PCIE-40GB", "NVIDIA-A100-PCIE-40GB"),
    ("  NVIDIA  L4 ", "NVIDIA-L4"),
    ("", ""),
])
def test_model_from_product_name(name: str, model: str) -> None:
    assert gpus.model_from_product_name(name) == model


def test_pieces_tile_the_window() -> None:
    got = pieces({"a": [(0, 30), (50, 80)], "b": [(20, 60)], "c": [(-10, 0), (100, 120)]}, (0, 100))
    assert got == [
        Piece(0, 20, frozenset({"a"})),
        Piece(20, 30, frozenset({"a", "b"})),
        Piece(30, 50, frozenset({"b"})),
        Piece(50, 60, frozenset({"a", "b"})),
        Piece(60, 80, frozenset({"a"})),
        Piece(80, 100, frozenset()),
    ]
    assert pieces({}, (0, 10)) == [Piece(0, 10, frozenset())]
    # a key's own overlapping intervals do not end its hold early
    assert pieces({"a": [(0, 50), (10, 20)]}, (0, 60)) == [
        Piece(0, 10, frozenset({"a"})), Piece(10, 20, frozenset({"a"})), Piece(20, 50, frozenset({"a"})),
        Piece(50, 60, frozenset()),
    ]


def test_covered_counts_a_second_once() -> None:
    assert covered([(0, 10), (5, 15), (20, 30), (40, 50)], Piece(0, 25, frozenset())) == 20
    assert covered([], Piece(0, 25, frozenset())) == 0
