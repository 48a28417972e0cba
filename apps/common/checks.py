"""System checks for the invariants gpufinops relies on (run by `manage.py check` and every management command).

- The ledger is UTC-only: hour buckets, day rollups and API ranges assume TIME_ZONE == "UTC".
- With DEBUG off the SECRET_KEY must be a real production secret. settings.py keeps a random placeholder
  when SECRET_KEY is unset so that this check, not an ImproperlyConfigured traceback, is what the operator sees.
"""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured

from apps.common.constants import DEV_SECRET_KEY, MIN_SECRET_KEY_LENGTH, MISSING_SECRET_PREFIX


@register(Tags.compatibility)
def check_time_zone_is_utc(app_configs, **kwargs):
    """Error when TIME_ZONE is not UTC: every bucket boundary in the ledger is a UTC hour."""
    if settings.TIME_ZONE == "UTC" and settings.USE_TZ:
        return []
    return [
        Error(
            f"TIME_ZONE must be 'UTC' with USE_TZ = True (got TIME_ZONE={settings.TIME_ZONE!r}, "
            f"USE_TZ={settings.USE_TZ}).",
            hint="The GPU-hour ledger buckets by UTC hour; local time zones belong in the presentation only.",
            id="gpufinops.E001",
        )
    ]


@register(Tags.security)
def check_production_secret_key(app_configs, **kwargs):
    """Error when DEBUG is off and SECRET_KEY is unset, the development default, or shorter than 50 characters."""
    if settings.DEBUG:
        return []
    try:
        key = settings.SECRET_KEY or ""
    except ImproperlyConfigured:  # Django refuses to hand out an empty SECRET_KEY
        key = ""
    if not key or key.startswith(MISSING_SECRET_PREFIX):
        problem = "SECRET_KEY is not set"
    elif key == DEV_SECRET_KEY:
        problem = "SECRET_KEY is the development default"
    elif len(key) < MIN_SECRET_KEY_LENGTH:
        problem = f"SECRET_KEY is only {len(key)} characters long"
    else:
        return []
    return [
        Error(
            f"{problem} while DEBUG is off.",
            hint=(
                f"Set SECRET_KEY (or SECRET_KEY_FILE) to a random string of at least {MIN_SECRET_KEY_LENGTH} "
                "characters, e.g. `python -c 'import secrets; print(secrets.token_urlsafe(64))'`, "
                "or set DEBUG=1 for development."
            ),
            id="gpufinops.E002",
        )
    ]



@register(Tags.security, deploy=True)
def check_secrets_key(app_configs, **kwargs):
    """Warning (deploy) when cluster credentials are encrypted with a key derived from SECRET_KEY."""
    from apps.common.secrets import using_derived_key

    if settings.DEBUG or not using_derived_key():
        return []
    return [
        Warning(
            "GPUFINOPS_SECRETS_KEY is not set: cluster credentials are encrypted with a key derived from SECRET_KEY.",
            hint="Set GPUFINOPS_SECRETS_KEY (or GPUFINOPS_SECRETS_KEY_FILE) to `manage.py rotate_secrets --new-key`, "
            "so rotating SECRET_KEY does not make stored credentials unreadable.",
            id="gpufinops.W001",
        )
    ]
