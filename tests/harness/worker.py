"""A real `celery -A gpufinops worker` subprocess against a given broker and database.

    worker = CeleryWorker(broker_url=..., database_url=..., log_path=...).start()   # waits for control.ping
    ...
    worker.stop()   # warm shutdown (SIGTERM); worker.kill() simulates a worker dying (SIGKILL to its group)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

REPO_ROOT = Path(__file__).resolve().parents[2]


class CeleryWorkerError(RuntimeError):
    """The worker did not start or did not stop."""


def database_url_from_settings(db: dict) -> str:
    """A DATABASE_URL for Django's DATABASES entry `db` (after test-database setup, NAME is the test DB)."""
    engine = db["ENGINE"]
    name = str(db["NAME"])
    if engine == "django.db.backends.sqlite3":
        if name == ":memory:" or name.startswith("file:") or "mode=memory" in name:
            raise CeleryWorkerError("an in-memory SQLite test database cannot be shared with a worker process")
        return f"sqlite:///{Path(name).resolve()}"
    if engine in {"django.db.backends.postgresql", "django.db.backends.postgresql_psycopg2"}:
        user = quote(db.get("USER") or "", safe="")
        password = quote(db.get("PASSWORD") or "", safe="")
        auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
        host = db.get("HOST") or "127.0.0.1"
        port = f":{db['PORT']}" if db.get("PORT") else ""
        return f"postgres://{auth}{host}{port}/{quote(name, safe='')}"
    raise CeleryWorkerError(f"no DATABASE_URL form for engine {engine}")


class CeleryWorker:
    """One worker process (own process group), identified by a unique node name."""

    def __init__(self, *, broker_url: str, database_url: str, log_path: Path, result_backend: str | None = None,
                 concurrency: int = 1, pool: str = "prefork", queues: list[str] | None = None,
                 extra_env: dict[str, str] | None = None, extra_args: list[str] | None = None) -> None:
        self.broker_url = broker_url
        self.result_backend = result_backend if result_backend is not None else broker_url
        self.database_url = database_url
        self.log_path = log_path
        self.concurrency = concurrency
        self.pool = pool
        self.queues = queues
        self.extra_env = extra_env or {}
        self.extra_args = extra_args or []
        self.hostname = f"gpufinops-test-{uuid.uuid4().hex[:8]}@localhost"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def command(self) -> list[str]:
        args = [
            sys.executable, "-m", "celery", "-A", "gpufinops", "worker",
            "-P", self.pool, "-c", str(self.concurrency), "-n", self.hostname,
            "--loglevel", "INFO", "--without-gossip", "--without-mingle",
        ]
        if self.queues:
            args += ["-Q", ",".join(self.queues)]
        return args + self.extra_args

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "gpufinops.settings",
                "DATABASE_URL": self.database_url,
                "CELERY_BROKER_URL": self.broker_url,
                "CELERY_RESULT_BACKEND": self.result_backend,
                "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")])),
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.update(self.extra_env)
        return env

    def start(self, timeout: float = 60.0) -> CeleryWorker:
        """Start the worker and wait until it answers a control ping under its node name."""
        log = self.log_path.open("ab")
        try:
            self.process = subprocess.Popen(
                self.command(), cwd=REPO_ROOT, env=self.environment(), stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()
        from celery import Celery

        probe = Celery("gpufinops-test-probe", broker=self.broker_url, set_as_current=False)
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise CeleryWorkerError(f"celery worker exited with {self.process.returncode}:\n{self.log_tail()}")
                replies = probe.control.ping(destination=[self.hostname], timeout=1.0)
                if any(self.hostname in reply for reply in replies):
                    return self
            self.kill()
            raise CeleryWorkerError(f"celery worker not ready after {timeout}s:\n{self.log_tail()}")
        finally:
            probe.close()

    def stop(self, timeout: float = 30.0) -> None:
        """Warm shutdown: SIGTERM lets the current task finish; SIGKILL to the group after `timeout`."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._kill_group()
        self.process = None

    def kill(self) -> None:
        """Simulate the worker dying: SIGKILL its whole process group (main process and pool children)."""
        if self.process is None:
            return
        self._kill_group()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired as exc:
            raise CeleryWorkerError(f"celery worker {self.process.pid} survived SIGKILL") from exc

    def _kill_group(self) -> None:
        # The group was created by start_new_session for this worker alone, so it holds only its processes.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""
