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


def test_the_backfill_split_by_window_makes_the_blocks_promtool_makes_of_the_whole_file(tmp_path):
    """tests/harness/backfill.py writes one file per two-hour window before promtool (a third of its CPU): the blocks
    must be the ones promtool makes of the whole file (time ranges, samples, series, chunks), and every family's
    metadata must come with its samples in each window's file."""
    import subprocess

    from tests.harness.backfill import backfill, block_listing, split_by_window
    from tests.harness.services import require_binary

    promtool = require_binary("promtool")
    start = (int(time.time()) // 7200 - 24) * 7200 + 1800  # mid-window: the first and last windows are partial
    path = tmp_path / "history.om"
    lines = []
    for family in ("gpufinops_a", "gpufinops_b"):
        lines += [f"# HELP {family} A gauge.", f"# TYPE {family} gauge"]
        for ts in range(start, start + 5 * 3600, 60):
            lines += [f'{family}{{gpu="0",note="two words"}} {ts % 97} {ts}', f'{family}{{gpu="1"}} 1.5 {ts}.000']
    path.write_text("\n".join(lines) + "\n# EOF\n")

    chunks = split_by_window(path, tmp_path)
    assert len(chunks) == 3  # 5 hours from half an hour into a window: half of one, one whole, three quarters
    assert all(c.read_text().count("# TYPE gpufinops_b gauge") == 1 and c.read_text().endswith("# EOF\n")
               for c in chunks)

    whole, split = tmp_path / "whole", tmp_path / "split"
    subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(path), str(whole)], check=True)
    split.mkdir()
    backfill(promtool, path, split, timeout=120)
    assert block_listing(promtool, split) == block_listing(promtool, whole)
    assert sum(int(row[2]) for row in block_listing(promtool, split)) == 2 * 2 * 5 * 60  # every sample, once
