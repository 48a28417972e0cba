"""A real Prometheus answers PromQL over history backfilled from OpenMetrics with promtool."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.services


def write_gauge(path, *, start: int, hours: int, step: int = 60) -> None:
    """gpufinops_test_gauge = minute-of-hour (0..59) every `step` seconds for `hours` hours from `start`."""
    lines = ["# HELP gpufinops_test_gauge A gauge for the harness test.", "# TYPE gpufinops_test_gauge gauge"]
    for ts in range(start, start + hours * 3600, step):
        lines.append(f'gpufinops_test_gauge{{gpu="0"}} {(ts - start) // 60 % 60} {ts}')
    path.write_text("\n".join(lines) + "\n# EOF\n")


def test_it_answers_promql_over_backfilled_history(prometheus_factory, tmp_path):
    end = (int(time.time()) // 3600 - 24) * 3600  # an hour boundary one day ago
    start = end - 3 * 3600
    path = tmp_path / "history.om"
    write_gauge(path, start=start, hours=3)

    server = prometheus_factory(path)

    at = start + 2 * 3600 - 1  # the second hour: samples at minute 0..59 -> average 29.5
    server.wait_for("gpufinops_test_gauge", at=at)
    assert server.query_value('avg_over_time(gpufinops_test_gauge{gpu="0"}[1h])', at=at) == pytest.approx(29.5)
    assert server.query_value("count_over_time(gpufinops_test_gauge[1h])", at=at) == 60


def test_it_restarts_prometheus_on_the_same_port_and_data(prometheus_factory, tmp_path):
    end = (int(time.time()) // 3600 - 24 * 14) * 3600  # two weeks old
    path = tmp_path / "history.om"
    write_gauge(path, start=end - 3600, hours=1)
    server = prometheus_factory(path)
    url = server.url

    server.stop()
    with pytest.raises(OSError):
        server.query("up")
    server.start()
    assert server.url == url
    assert server.query_value("max_over_time(gpufinops_test_gauge[1h])", at=end - 1) == 59
