"""System checks of the bill's settings."""

from __future__ import annotations

import re

from django.conf import settings
from django.core.checks import Error, Tags, register

COST_COLUMNS = ("EffectiveCost", "BilledCost")


@register(Tags.compatibility)
def check_bill_settings(app_configs, **kwargs):
    """Error when GPUFINOPS_BILL_COST names no FOCUS cost column, or GPUFINOPS_BILL_GPU_MACHINES is no regex."""
    errors = []
    if settings.GPUFINOPS_BILL_COST not in COST_COLUMNS:
        errors.append(Error(f"GPUFINOPS_BILL_COST={settings.GPUFINOPS_BILL_COST!r} is not a FOCUS cost column.",
                            hint="Use EffectiveCost (the default) or BilledCost.", id="gpufinops.E005"))
    try:
        re.compile(settings.GPUFINOPS_BILL_GPU_MACHINES)
    except re.error as exc:
        errors.append(Error(f"GPUFINOPS_BILL_GPU_MACHINES is not a regular expression ({exc}).",
                            id="gpufinops.E006"))
    return errors
