"""System checks for the ledger's invariants, and a clean `check --deploy` for a production configuration."""

from __future__ import annotations

from apps.common.checks import check_production_secret_key, check_time_zone_is_utc
from apps.common.constants import DEV_SECRET_KEY, MISSING_SECRET_PREFIX
from tests.foundation.helpers import clean_env, manage

PRODUCTION_SECRET = "k3r9-" + "a1b2c3d4e5f6g7h8i9j0" * 3  # 65 characters, varied enough for check --deploy


def ids(messages) -> list[str]:
    return [message.id for message in messages]


def test_it_requires_utc(settings):
    settings.TIME_ZONE = "Europe/Berlin"
    assert ids(check_time_zone_is_utc(None)) == ["gpufinops.E001"]
    settings.TIME_ZONE = "UTC"
    assert check_time_zone_is_utc(None) == []


def test_it_requires_a_production_secret_when_debug_is_off(settings):
    settings.DEBUG = False
    for bad in [MISSING_SECRET_PREFIX + "random-placeholder-" * 3, DEV_SECRET_KEY, "short-secret"]:
        settings.SECRET_KEY = bad
        assert ids(check_production_secret_key(None)) == ["gpufinops.E002"], bad
    settings.SECRET_KEY = PRODUCTION_SECRET
    assert check_production_secret_key(None) == []


def test_it_accepts_the_development_secret_in_debug(settings):
    settings.DEBUG = True
    settings.SECRET_KEY = DEV_SECRET_KEY
    assert check_production_secret_key(None) == []


def test_it_shows_the_operator_the_check_when_the_secret_is_missing(tmp_path):
    result = manage(["check"], clean_env(tmp_path, DEBUG="0", ALLOWED_HOSTS="gpufinops.example.com"))
    assert result.returncode != 0
    assert "gpufinops.E002" in result.stderr and "SECRET_KEY is not set" in result.stderr
    assert "ImproperlyConfigured" not in result.stderr


def test_it_passes_check_deploy_with_a_production_configuration(tmp_path):
    env = clean_env(tmp_path, DEBUG="0", SECRET_KEY=PRODUCTION_SECRET, ALLOWED_HOSTS="gpufinops.example.com")
    result = manage(["check", "--deploy", "--fail-level", "WARNING"], env)
    assert result.returncode != 0 and "gpufinops.W001" in result.stdout + result.stderr  # no secrets key yet
    env["GPUFINOPS_SECRETS_KEY"] = "Vv5a0Yf3Wn3Y0yWmZr8dq9v3k3JmL3qz6oX5l3uK7Wc="
    result = manage(["check", "--deploy", "--fail-level", "WARNING"], env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout
