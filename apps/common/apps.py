import logging

from django.apps import AppConfig

logger = logging.getLogger("gpufinops")


class CommonConfig(AppConfig):
    name = "apps.common"
    label = "common"

    def ready(self) -> None:
        """Register the system checks and the timestamp loader; say once, at start-up, when production runs without
        a broker."""
        from django.conf import settings
        from django.db.backends.signals import connection_created

        from apps.common import checks  # noqa: F401  (registers the checks)
        from apps.common.pgtime import use_psycopg_timestamp_loader

        # Timestamps read by psycopg's C loader rather than Django's Python one (apps/common/pgtime.py).
        connection_created.connect(use_psycopg_timestamp_loader, dispatch_uid="gpufinops-psycopg-timestamps")

        if not settings.DEBUG and not settings.CELERY_BROKER_URL:
            # A log line, not a system check warning: running without a broker is a supported production
            # mode (cron `manage.py collect`), and `check --deploy` must stay clean for it.
            logger.warning(
                "CELERY_BROKER_URL is unset: tasks run in-process and nothing collects every 5 minutes; "
                "run `python manage.py collect` from cron or start a broker with `celery -A gpufinops worker/beat`."
            )
