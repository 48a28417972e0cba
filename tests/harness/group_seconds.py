"""The seconds each pytest-xdist group took in the last run, so the next run hands the longest out first.

With `--dist loadgroup` a group runs whole on one worker, and the workers take groups in collection order
(tests/conftest.py keeps pytest-xdist from reordering them by test count). A long group drawn last ends the run on
one worker while the other idles, so tests/conftest.py sorts the groups by what they took last time (longest
first: the greedy schedule that finishes both workers together), falling back to its `slow` / long-fixture rule for
a group it has no figure for.

The controller sums each group's set-up, call and tear-down seconds from the workers' reports and, at the end,
merges them into `var/test-cache/xdist-group-seconds.json` (tests/harness/cache.py's folder, off with
GPUFINOPS_TEST_CACHE=0). It hands the figures of the previous run to every worker in its start-up input, so all
workers sort alike (pytest-xdist refuses workers whose collections differ). The figures only order the run: a stale
or missing file changes no result.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.harness import cache

FILE_NAME = "xdist-group-seconds.json"
WORKER_INPUT_KEY = "gpufinops_group_seconds"


def group_of(nodeid: str) -> str:
    """The xdist group pytest-xdist appended to a node id (`path::test@group`); the module without one."""
    return nodeid.rsplit("@", 1)[1] if "@" in nodeid else nodeid.split("::", 1)[0]


def _path() -> Path:
    return cache.cache_dir() / FILE_NAME


def _read() -> dict[str, float]:
    try:
        data = json.loads(_path().read_text())
    except (OSError, ValueError):
        return {}
    return {str(group): float(seconds) for group, seconds in data.items()} if isinstance(data, dict) else {}


def _write(seconds: dict[str, float]) -> None:
    target = _path()
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".tmp")
    with os.fdopen(handle, "w") as out:
        json.dump(seconds, out, indent=0, sort_keys=True)
    os.replace(temporary, target)  # whole or not at all: a parallel session never reads half of it


class GroupSeconds:
    """The controller's side: hand the last figures to the workers, record this run's."""

    def __init__(self) -> None:
        self.previous = _read()
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_configure_node(self, node: Any) -> None:  # pytest-xdist's hook, on the controller
        node.workerinput[WORKER_INPUT_KEY] = json.dumps(self.previous)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[group_of(report.nodeid)] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.seconds and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            _write({**self.previous, **self.seconds})


def register(config: pytest.Config) -> None:
    """On the controller of a pytest-xdist run, with the test cache on."""
    if cache.enabled() and config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput") \
            and getattr(config.option, "numprocesses", None):
        config.pluginmanager.register(GroupSeconds(), "gpufinops-group-seconds")


def previous_seconds(config: pytest.Config) -> dict[str, float]:
    """On a worker: the figures the controller handed it ({} elsewhere: a run on one process keeps its order)."""
    worker_input = getattr(config, "workerinput", None)
    if worker_input is None or WORKER_INPUT_KEY not in worker_input:
        return {}
    return {str(k): float(v) for k, v in json.loads(worker_input[WORKER_INPUT_KEY]).items()}
