"""What one whole GPU of a model offers: its framebuffer and a relative compute figure, for comparing a load
measured on one model with another (the savings' move to a cheaper model, docs/savings.md).

- **framebuffer_mib**: the total memory one GPU reports (`nvidia-smi`, NVML, GPU Feature Discovery's
  `nvidia.com/gpu.memory` label), MiB: e.g. 81,559 on `NVIDIA-H100-80GB-HBM3`, 23,034 on `NVIDIA-L4`.
- **dense_tflops**: dense FP16/BF16 Tensor Core TFLOPS from NVIDIA's datasheets (the figure without sparsity: half
  the datasheet's "with sparsity" one). The sources, all nvidia.com datasheets: H100 (SXM 989, PCIe 756, NVL 835),
  H200 (SXM 989), A100 (312, 40 GB and 80 GB, SXM and PCIe), A30 (165), L40S (362), L40 (181), L4 (121),
  A10 (125), T4 (65, mixed precision; Turing has no sparsity).

A compute figure says what a model can do at best; activity measured on one model (a share of its SMs' time)
translated to another through it assumes the load scales with the dense Tensor Core rate: an estimate, which the
savings print as an assumption. Pure: plain data in, plain data out.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Capability:
    family: str  # the row of the table, e.g. "H100 SXM"
    framebuffer_mib: int
    dense_tflops: float  # dense FP16/BF16 Tensor Core TFLOPS


# (family, words the model name holds, MiB, TFLOPS): the name's dash-separated words, upper-cased, so `L4` is
# `NVIDIA-L4` and not `NVIDIA-L40S`; most specific first ("H100 PCIe" before "H100").
_TABLE: tuple[tuple[str, tuple[str, ...], int, float], ...] = (
    ("H200", ("H200",), 143771, 989.0),
    ("H100 NVL", ("H100", "NVL"), 95830, 835.0),
    ("H100 PCIe", ("H100", "PCIE"), 81559, 756.0),
    ("H100 SXM", ("H100",), 81559, 989.0),
    ("A100 80GB", ("A100", "80GB"), 81920, 312.0),
    ("A100 40GB", ("A100",), 40960, 312.0),
    ("A30", ("A30",), 24576, 165.0),
    ("L40S", ("L40S",), 46068, 362.0),
    ("L40", ("L40",), 46068, 181.0),
    ("L4", ("L4",), 23034, 121.0),
    ("A10", ("A10",), 23028, 125.0),
    ("T4", ("T4",), 15360, 65.0),
)


def capability(model: str) -> Capability | None:
    """The row of a GPU model (the ledger's model name, GPU Feature Discovery's form: `NVIDIA-A100-SXM4-80GB`); None
    when the table does not know it (a move to or from it is never proposed)."""
    words = set(model.upper().replace(" ", "-").split("-"))
    for family, needs, mib, tflops in _TABLE:
        if all(w in words for w in needs):
            return Capability(family, mib, tflops)
    return None
