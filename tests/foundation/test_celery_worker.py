"""A real Celery worker process executes a task sent through Redis and writes to the test database."""

from __future__ import annotations

import os
import time
import uuid

import pytest

from apps.common.models import WorkerPing
from apps.common.tasks import ping_task

pytestmark = pytest.mark.services


@pytest.mark.parametrize("run", [1, 2])  # twice: the second test must not inherit the first one's closed pools
def test_it_executes_a_task_in_a_real_worker_through_redis(celery_worker_proc, run):
    token = uuid.uuid4().hex
    result = ping_task.delay(token)
    assert result.get(timeout=30) == f"pong:{token}"

    deadline = time.monotonic() + 10
    while not WorkerPing.objects.filter(token=token).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    ping = WorkerPing.objects.get(token=token)
    assert ping.pid != os.getpid()  # written by the worker's pool process, not in-process
    assert ping.hostname == celery_worker_proc.hostname


def test_it_reports_the_broker_ok_in_healthz(celery_broker, client, db, django_user_model):
    client.force_login(django_user_model.objects.create_user("ops", is_staff=True))
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"database": "ok", "broker": "ok", "status": "ok"}
