"""The processes of the image run with a read-only root filesystem, as the manifests run them.

Without a container runtime here, the test builds the same constraint on the host: in a private mount
namespace (`unshare -m`, root only) the root filesystem is remounted read-only and one tmpfs stands for the
pods' emptyDir volumes. gunicorn, a Celery worker and beat start with the manifests' arguments and
production settings (DEBUG=0, JSON logs); /healthz, /livez and /metrics answer, the worker's heartbeat file
appears, and no process logs a write error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.services import free_port, require_service

REPO = Path(__file__).resolve().parents[2]
VOLUME = "/run/gpufinops-volume"  # the emptyDir stand-in (the pods mount theirs at /tmp)

SCRIPT = r"""
set -eu
mount --make-rprivate /
mkdir -p {volume}
mount --bind / /
mount -o remount,bind,ro /
mount -t tmpfs -o size=64m tmpfs {volume}
if touch /gpufinops-rofs-probe 2>/dev/null; then echo "root filesystem is writable"; exit 3; fi
cd {repo}
gunicorn gpufinops.wsgi --bind=127.0.0.1:{port} --workers=2 --threads=2 --worker-tmp-dir=/dev/shm \
  --access-logfile=- --error-logfile=- > {volume}/web.log 2>&1 &
celery --app=gpufinops worker --loglevel=INFO --concurrency=1 --without-gossip --without-mingle \
  > {volume}/worker.log 2>&1 &
celery --app=gpufinops beat --loglevel=INFO --schedule={volume}/celerybeat-schedule > {volume}/beat.log 2>&1 &
ok=0
for i in $(seq 1 60); do
  if [ -e {volume}/worker-heartbeat ] && curl -sf -o /dev/null http://127.0.0.1:{port}/livez; then ok=1; break; fi
  sleep 0.5
done
sleep 2
echo "ready=$ok"
for path in /healthz /livez /metrics; do
  echo "$path $(curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{port}$path)"
done
python -m apps.monitoring.probes {volume}/worker-heartbeat 60 && echo "heartbeat fresh"
for job in $(jobs -p); do kill -0 "$job" && echo "running $job"; done
kill $(jobs -p); wait || true
echo "=== logs"
cat {volume}/web.log {volume}/worker.log {volume}/beat.log
"""


@pytest.mark.services
def test_web_worker_and_beat_run_on_a_read_only_root(transactional_db, test_database_url, redis_url, tmp_path):
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) to build a read-only root in a mount namespace")
    if not test_database_url.startswith("postgres"):
        require_service("postgresql", "a read-only root cannot hold the SQLite test database (set DATABASE_URL)")
    static = tmp_path / "static"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "GPUFINOPS_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="gpufinops.settings", PYTHONPATH=str(REPO), PYTHONDONTWRITEBYTECODE="1",
        DEBUG="0", SECRET_KEY="k" * 64, ALLOWED_HOSTS="gpufinops.example.com", POD_IP="127.0.0.1",
        USE_X_FORWARDED_PROTO="1", LOG_FORMAT="json", DATABASE_URL=test_database_url,
        CELERY_BROKER_URL=redis_url, STATIC_ROOT=str(static), HOME=VOLUME, TMPDIR=VOLUME,
        GPUFINOPS_WORKER_HEARTBEAT_FILE=f"{VOLUME}/worker-heartbeat",
    )
    collect = subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=180)
    assert collect.returncode == 0, collect.stderr[-2000:]
    script = SCRIPT.format(volume=VOLUME, repo=REPO, port=free_port())
    out = subprocess.run(["unshare", "-m", "bash", "-c", script], env=env, capture_output=True, text=True,
                         timeout=180)
    report, _, logs = out.stdout.partition("=== logs")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "ready=1" in report, out.stdout[-4000:]
    for line in ("/healthz 200", "/livez 200", "/metrics 200", "heartbeat fresh"):
        assert line in report, out.stdout[-4000:]
    assert report.count("running ") == 3, report
    for marker in ("Read-only file system", "Errno 30", "Traceback"):
        assert marker not in logs, logs[-4000:]
    assert '"level": "INFO"' in logs  # JSON log lines with DEBUG off
