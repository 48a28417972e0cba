"""Run Django in a fresh subprocess with a chosen environment (settings are read once, at import)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# Variables settings.py reads that would leak from the caller's environment into a "clean" run.
SETTINGS_ENV = (
    "DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "SECRET_KEY", "SECRET_KEY_FILE", "DEBUG",
    "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "CACHE_URL", "EMAIL_URL", "SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE", "SECURE_HSTS_SECONDS", "SECURE_HSTS_INCLUDE_SUBDOMAINS", "SECURE_HSTS_PRELOAD",
    "USE_X_FORWARDED_PROTO", "DJANGO_SETTINGS_MODULE", "GPUFINOPS_DEVTOOLS",
)


def clean_env(tmp_path: Path, **overrides: str) -> dict[str, str]:
    """os.environ without the settings variables, with var/ in tmp_path, plus `overrides`."""
    env = {key: value for key, value in os.environ.items() if key not in SETTINGS_ENV}
    env["GPUFINOPS_VAR_DIR"] = str(tmp_path / "var")
    env["DJANGO_SETTINGS_MODULE"] = "gpufinops.settings"
    env.update(overrides)
    return env


def manage(args: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python manage.py <args>` in the repository root."""
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def settings_in_subprocess(env: dict[str, str], names: list[str]) -> dict:
    """The named Django settings as a fresh process with `env` sees them (JSON-serialised with str fallback)."""
    # Settings only: reading them configures Django from the settings module without `django.setup()`, which would
    # import every installed app's models (three times the CPU of a settings read, and nothing the callers check).
    code = (
        "import json; from django.conf import settings; "
        f"print(json.dumps({{n: getattr(settings, n) for n in {names!r}}}, default=str))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])
