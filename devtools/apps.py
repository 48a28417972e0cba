from django.apps import AppConfig


class DevtoolsConfig(AppConfig):
    """Development tools: the simulated GPU cluster (``devtools.simulator``) and the `simulate` and `demo`
    commands. No product module imports this package."""

    name = "devtools"
    label = "devtools"
    verbose_name = "Development tools"
