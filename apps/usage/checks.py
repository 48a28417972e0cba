"""System checks of the ledger's settings."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, register

from apps.inventory.gpus.hami import ShareRule
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


@register(Tags.compatibility)
def check_hami_share(app_configs, **kwargs):
    """Error when GPUFINOPS_HAMI_SHARE names no share rule (collection would fail on the first HAMi pod)."""
    rules = [str(r) for r in ShareRule]
    if settings.GPUFINOPS_HAMI_SHARE in rules:
        return []
    return [
        Error(
            f"GPUFINOPS_HAMI_SHARE={settings.GPUFINOPS_HAMI_SHARE!r} is not a HAMi share rule.",
            hint=f"Use one of: {', '.join(rules)}.",
            id="gpufinops.E005",
        )
    ]
