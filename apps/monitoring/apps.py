from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    """The service's own health: collection runs, `/metrics`, `/livez`, structured log context, worker probes."""

    name = "apps.monitoring"
    label = "monitoring"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from apps.monitoring.probes import install_worker_heartbeat

        install_worker_heartbeat()
