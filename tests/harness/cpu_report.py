"""An opt-in record of what each test costs in CPU (GPUFINOPS_TEST_CPU_REPORT=FILE): where the suite's time goes.

The suite is CPU-bound on a 2-core machine (three pytest-xdist workers keep both cores busy), so wall-clock
`--durations` mostly measures the queue for the cores; the CPU seconds of the test process (user + system, set-up,
call and tear-down together) and of the processes it started and waited for (`RUSAGE_CHILDREN`: promtool,
exporters; a service still running, such as Prometheus or a Celery worker, is not counted until it is reaped) say
what a test costs. Each worker appends one tab-separated line per test: node id, own CPU s, children CPU s, wall s.
`python -m tests.harness.cpu_report FILE` sums it per module and prints the most expensive.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


class CpuReport:
    def __init__(self, path: Path) -> None:
        self.path = path

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):  # type: ignore[no-untyped-def]
        own, children, wall = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN), time.monotonic()
        yield
        line = (f"{item.nodeid}\t{_cpu(resource.RUSAGE_SELF) - own:.3f}\t"
                f"{_cpu(resource.RUSAGE_CHILDREN) - children:.3f}\t{time.monotonic() - wall:.3f}\n")
        with self.path.open("a") as out:  # one short append per test: lines of parallel workers do not interleave
            out.write(line)


def register(config: pytest.Config) -> None:
    target = os.environ.get("GPUFINOPS_TEST_CPU_REPORT")
    if target:
        config.pluginmanager.register(CpuReport(Path(target)), "gpufinops-cpu-report")


def main(path: str, top: int = 40) -> None:
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    tests: list[tuple[float, str]] = []
    for line in Path(path).read_text().splitlines():
        node, own, children, wall = line.split("\t")
        row = modules[node.split("::")[0]]
        row[0] += float(own)
        row[1] += float(children)
        row[2] += float(wall)
        row[3] += 1
        tests.append((float(own) + float(children), node))
    total = sum(r[0] + r[1] for r in modules.values())
    print(f"{len(tests)} tests, {total:.0f} CPU-s (own + children)")
    print(f"{'module':<70} {'tests':>5} {'own':>8} {'child':>8} {'wall':>8}")
    for name, (own, children, wall, n) in sorted(modules.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))[:top]:
        print(f"{name:<70} {n:>5} {own:8.1f} {children:8.1f} {wall:8.1f}")
    print("\nmost expensive tests:")
    for cost, node in sorted(tests, reverse=True)[:top]:
        print(f"{cost:8.1f}  {node}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)
