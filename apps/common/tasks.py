"""Trivial tasks that prove the Celery plumbing: broker in, worker, database out."""

from __future__ import annotations

import os

from celery import shared_task


@shared_task(bind=True, name="apps.common.tasks.ping_task")
def ping_task(self, token: str) -> str:
    """Write a WorkerPing row for `token` and return "pong:<token>"."""
    from apps.common.models import WorkerPing

    WorkerPing.objects.create(token=token, hostname=self.request.hostname or "", pid=os.getpid())
    return f"pong:{token}"
