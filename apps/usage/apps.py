from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "apps.usage"
    label = "usage"

    def ready(self) -> None:
        from apps.usage import checks  # noqa: F401  (registers the checks)
