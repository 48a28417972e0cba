"""System checks of the ledger's settings."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, register

from apps.usage.activity import SIGNALS


@register(Tags.compatibility)
def check_default_signal(app_configs, **kwargs):
    """Error when GPUFINOPS_DEFAULT_SIGNAL names no signal the ledger keeps."""
    if settings.GPUFINOPS_DEFAULT_SIGNAL in SIGNALS:
        return []
    return [
        Error(
            f"GPUFINOPS_DEFAULT_SIGNAL={settings.GPUFINOPS_DEFAULT_SIGNAL!r} is not a signal the ledger keeps.",
            hint=f"Use one of: {', '.join(SIGNALS)}.",
            id="gpufinops.E004",
        )
    ]
