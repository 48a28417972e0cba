"""A real Celery worker touches GPUFINOPS_WORKER_HEARTBEAT_FILE from its event loop; the probe command reads it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from apps.monitoring import probes

REPO = Path(__file__).resolve().parents[2]


def test_probe_command(tmp_path):
    beat = tmp_path / "hb"
    assert probes.main([str(beat), "60"]) == 1  # missing
    beat.touch()
    assert probes.main([str(beat), "60"]) == 0
    old = time.time() - 300
    os.utime(beat, (old, old))
    assert probes.main([str(beat), "60"]) == 1
    out = subprocess.run([sys.executable, "-m", "apps.monitoring.probes", str(beat), "600"], cwd=REPO, timeout=30)
    assert out.returncode == 0


def test_worker_touches_the_heartbeat_file(celery_worker_factory, tmp_path):
    beat = tmp_path / "worker-heartbeat"
    worker = celery_worker_factory(extra_env={"GPUFINOPS_WORKER_HEARTBEAT_FILE": str(beat)})
    deadline = time.monotonic() + 30
    while not beat.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert beat.exists(), worker.log_tail()
    first = beat.stat().st_mtime
    deadline = time.monotonic() + 30
    while beat.stat().st_mtime == first and time.monotonic() < deadline:
        time.sleep(1)
    assert beat.stat().st_mtime > first, "the heartbeat is touched again while the worker runs"
    assert probes.main([str(beat), "30"]) == 0
    worker.stop()
    assert not beat.exists(), "a stopped worker removes its heartbeat"
