"""Shared models: only the worker heartbeat that proves a Celery worker reaches the database."""

from __future__ import annotations

from django.db import models


class WorkerPing(models.Model):
    """One `ping_task` execution: written by a Celery worker, read by tests and operators."""

    token = models.CharField(max_length=100, db_index=True)
    hostname = models.CharField(max_length=255, blank=True)
    pid = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.token} from {self.hostname or '?'} (pid {self.pid})"
