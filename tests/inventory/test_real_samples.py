"""The repository's fixtures of real clusters (tests/fixtures/) say what the verbatim public samples say.

The samples live in the project workspace (../shared/reference/samples/real/, or GPUFINOPS_SHARED_DIR), not in
the repository: without them these tests skip, naming the missing path (in CI, GPUFINOPS_REQUIRE_SERVICES=1,
they fail). Every other test reads the fixtures only.
"""

from __future__ import annotations

import json
import re

import pytest

from apps.inventory import gpus
from tests.fixtures import dcgm_series, gfd_labels
from tests.harness.shared import shared_file

SAMPLES_DIR = "reference/samples/real"
# `"key": "value"` (JSON and its excerpts) or `key=value` (kubectl describe), one label a line.
_LABEL_LINE = re.compile(r'^[\s+]*"?(nvidia\.com/[^"=\s]+)"?\s*[:=]\s*"?([^",\s]*)"?,?\s*$')


def sample_labels(name: str) -> dict[str, str]:
    """The `nvidia.com/*` labels of one sample file (later lines win where an excerpt repeats a key)."""
    text = shared_file(f"{SAMPLES_DIR}/{name}").read_text()
    if name.endswith(".json"):
        return {k: v for k, v in json.loads(text).items() if k.startswith(gpus.NVIDIA_PREFIX)}
    labels = {}
    for line in text.splitlines():
        match = _LABEL_LINE.match(line)
        if match:
            labels[match.group(1)] = match.group(2)
    return labels


@pytest.mark.parametrize("fixture", sorted(gfd_labels.SAMPLES))
def test_every_restated_label_is_the_samples(fixture):
    name, restated = gfd_labels.SAMPLES[fixture]
    sample = sample_labels(name)
    assert {k: sample.get(k) for k in restated} == restated


@pytest.mark.parametrize("fixture", ["H100_MIG_MIXED", "H100_MIG_DISABLED"])
def test_the_rules_read_a_restated_node_as_the_whole_sample(fixture):
    """What the fixture leaves out of a full label set changes nothing the GPU rules conclude."""
    name, restated = gfd_labels.SAMPLES[fixture]
    capacity = gfd_labels.H100_MIG_MIXED_CAPACITY if fixture == "H100_MIG_MIXED" else {"nvidia.com/gpu": "1"}
    assert gpus.classify_node(restated, capacity) == gpus.classify_node(sample_labels(name), capacity)


def test_every_restated_dcgm_line_is_in_the_sample():
    sample = set(shared_file(f"{SAMPLES_DIR}/{dcgm_series.SAMPLE}").read_text().splitlines())
    assert [line for line in dcgm_series.LINES if line not in sample] == []
