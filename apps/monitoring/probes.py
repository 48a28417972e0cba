"""Celery worker liveness without `celery inspect ping` (deploy-and-operate §3.4): a bootstep touches
`GPUFINOPS_WORKER_HEARTBEAT_FILE` every few seconds from the worker's own timer (the event loop, with the
prefork pool), so the file goes stale when the worker hangs; the probe checks its age
(`python -m apps.monitoring.probes /tmp/worker-heartbeat 60`). Unset setting: nothing is written.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

HEARTBEAT_INTERVAL_SECONDS = 10.0


def _heartbeat_step() -> type:
    from celery import bootsteps

    class WorkerHeartbeat(bootsteps.StartStopStep):
        requires = ("celery.worker.components:Timer",)

        def __init__(self, worker: Any, **kwargs: Any) -> None:
            from django.conf import settings

            self.path = Path(settings.GPUFINOPS_WORKER_HEARTBEAT_FILE) if settings.GPUFINOPS_WORKER_HEARTBEAT_FILE \
                else None
            self.tref = None

        def start(self, worker: Any) -> None:
            if self.path is None:
                return
            self.beat()
            self.tref = worker.timer.call_repeatedly(HEARTBEAT_INTERVAL_SECONDS, self.beat, priority=10)

        def stop(self, worker: Any) -> None:
            if self.tref is not None:
                self.tref.cancel()
            if self.path is not None:
                self.path.unlink(missing_ok=True)

        def beat(self) -> None:
            assert self.path is not None
            self.path.touch()

    return WorkerHeartbeat


def install_worker_heartbeat() -> None:
    """Add the step to the current Celery app's worker blueprint (called from AppConfig.ready, which runs
    before a worker builds its blueprint)."""
    try:
        from celery import current_app
    except ImportError:  # pragma: no cover - celery is a dependency
        return
    steps = current_app.steps["worker"]
    if not any(getattr(s, "__name__", "") == "WorkerHeartbeat" for s in steps):
        steps.add(_heartbeat_step())


def main(argv: list[str]) -> int:
    """`python -m apps.monitoring.probes PATH MAX_AGE_SECONDS`: exit 0 while PATH was touched within the age."""
    path, max_age = argv[0], float(argv[1]) if len(argv) > 1 else 60.0
    try:
        age = time.time() - os.path.getmtime(path)
    except OSError as exc:
        print(f"no heartbeat: {exc}", file=sys.stderr)
        return 1
    if age > max_age:
        print(f"heartbeat is {age:.0f}s old (max {max_age:.0f}s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
