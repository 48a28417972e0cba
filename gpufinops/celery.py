"""The Celery app and the one beat schedule of gpufinops.

Every periodic task here has a management-command twin that runs the same service.
"""

from __future__ import annotations

import os

from celery import Celery
from celery.schedules import crontab

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpufinops.settings")

app = Celery("gpufinops")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

app.conf.beat_schedule = {
    # Every 5 minutes: per cluster, refresh the provisional hour, finalize ended hours, retry failed
    # buckets whose backoff has passed, and catch up after an outage. Twin: `manage.py collect`.
    # One task per cluster, queued without countdown so that every free worker takes the next cluster.
    "collect-all-clusters": {
        "task": "apps.ingest.tasks.collect_all_clusters_task",
        "schedule": crontab(minute="*/5"),
    },
    # Hourly at :30 and :40: the weekly (last ISO week) and monthly (last calendar month) report checks: a
    # period's final edition once every hour of it is final, and restatements of final periods whose figures
    # changed; once per subscription, period and edition. Twin: `manage.py send_reports [--kind weekly|monthly]`.
    "send-weekly-reports": {
        "task": "apps.reports.tasks.send_reports_task",
        "schedule": crontab(minute=30),
        "kwargs": {"kind": "weekly"},
    },
    "send-monthly-reports": {
        "task": "apps.reports.tasks.send_reports_task",
        "schedule": crontab(minute=40),
        "kwargs": {"kind": "monthly"},
    },
    # Every 5 minutes, 2 minutes after collection: tell each team about its new findings (e-mail to members, team
    # webhooks), once per finding and recipient, rate-limited; failed sends retried. Twin: `manage.py notify_findings`.
    "notify-findings": {
        "task": "apps.findings.tasks.notify_findings_task",
        "schedule": crontab(minute="2-59/5"),
    },
    # Hourly at :15: every budget's spend and forecast; alerts once per budget, period and threshold (e-mail to the
    # team's members, team webhooks). Twin: `manage.py check_budgets`.
    "check-budgets": {
        "task": "apps.budgets.tasks.check_budgets_task",
        "schedule": crontab(minute=15),
    },
    # Hourly at :20: thin capacity snapshots older than 7 days to one per hour. Twin: `manage.py prune_capacity`.
    "prune-capacity-history": {
        "task": "apps.capacity.tasks.prune_capacity_history_task",
        "schedule": crontab(minute=20),
    },
    # Hourly at :25: the same for Kueue snapshots. Twin: `manage.py prune_queues`.
    "prune-queue-history": {
        "task": "apps.queues.tasks.prune_queue_history_task",
        "schedule": crontab(minute=25),
    },
    # Daily at 01:05: the coming months' partitions of the pod- and node-hour tables (PostgreSQL). Twin:
    # `manage.py ensure_partitions`.
    "ensure-ledger-partitions": {
        "task": "apps.usage.tasks.ensure_partitions_task",
        "schedule": crontab(minute=5, hour=1),
    },
    # Daily at 01:15: pod and node rows older than GPUFINOPS_LEDGER_KEEP_MONTHS (rollups stay). Twin:
    # `manage.py prune_ledger`.
    "prune-ledger": {
        "task": "apps.usage.tasks.prune_ledger_task",
        "schedule": crontab(minute=15, hour=1),
    },
}
