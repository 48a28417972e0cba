"""Settings come from the environment, with development-safe defaults (interfaces.md "Configuration")."""

from __future__ import annotations

from tests.foundation.helpers import clean_env, settings_in_subprocess


def test_it_defaults_to_an_sqlite_file_under_var(tmp_path):
    values = settings_in_subprocess(clean_env(tmp_path), ["DATABASES", "DEBUG"])
    db = values["DATABASES"]["default"]
    assert db["ENGINE"] == "django.db.backends.sqlite3"
    assert db["NAME"] == str(tmp_path / "var" / "gpufinops.sqlite3")
    assert values["DEBUG"] is True


def test_it_parses_a_postgres_database_url(tmp_path):
    env = clean_env(tmp_path, DATABASE_URL="postgres://ledger:s%40cret@db.internal:6543/gpufinops")
    db = settings_in_subprocess(env, ["DATABASES"])["DATABASES"]["default"]
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["USER"], db["PASSWORD"], db["HOST"], db["PORT"], db["NAME"]) == (
        "ledger", "s@cret", "db.internal", 6543, "gpufinops"
    )


def test_it_runs_tasks_in_process_when_no_broker_is_set(tmp_path):
    values = settings_in_subprocess(clean_env(tmp_path), ["CELERY_BROKER_URL", "CELERY_TASK_ALWAYS_EAGER"])
    assert values == {"CELERY_BROKER_URL": "", "CELERY_TASK_ALWAYS_EAGER": True}


def test_it_uses_the_broker_when_one_is_set(tmp_path):
    env = clean_env(tmp_path, CELERY_BROKER_URL="redis://127.0.0.1:6379/3")
    values = settings_in_subprocess(env, ["CELERY_BROKER_URL", "CELERY_TASK_ALWAYS_EAGER", "CELERY_TASK_ACKS_LATE",
                                          "CELERY_WORKER_PREFETCH_MULTIPLIER"])
    assert values == {
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/3",
        "CELERY_TASK_ALWAYS_EAGER": False,
        "CELERY_TASK_ACKS_LATE": True,
        "CELERY_WORKER_PREFETCH_MULTIPLIER": 1,
    }


def test_it_reads_secret_debug_and_allowed_hosts(tmp_path):
    secret = "x" * 60
    env = clean_env(tmp_path, SECRET_KEY=secret, DEBUG="0", ALLOWED_HOSTS="gpufinops.example.com, localhost")
    values = settings_in_subprocess(env, ["SECRET_KEY", "DEBUG", "ALLOWED_HOSTS", "SECURE_SSL_REDIRECT"])
    assert values == {
        "SECRET_KEY": secret,
        "DEBUG": False,
        "ALLOWED_HOSTS": ["gpufinops.example.com", "localhost"],
        "SECURE_SSL_REDIRECT": True,
    }


def test_it_reads_the_team_label(tmp_path):
    env = clean_env(tmp_path, GPUFINOPS_TEAM_LABEL="example.com/team")
    assert settings_in_subprocess(env, ["GPUFINOPS_TEAM_LABEL"]) == {"GPUFINOPS_TEAM_LABEL": "example.com/team"}


def test_production_settings_do_not_install_the_devtools(tmp_path):
    """DEBUG off with the secrets production requires: no simulator, no `demo` or `simulate` command."""
    env = clean_env(tmp_path, DEBUG="0", SECRET_KEY="p" * 64, GPUFINOPS_SECRETS_KEY="k" * 43 + "=",
                    GPUFINOPS_METRICS_TOKEN="m" * 40, ALLOWED_HOSTS="gpufinops.example.com")
    values = settings_in_subprocess(env, ["DEBUG", "GPUFINOPS_DEVTOOLS", "INSTALLED_APPS"])
    assert (values["DEBUG"], values["GPUFINOPS_DEVTOOLS"]) == (False, False)
    assert not [app for app in values["INSTALLED_APPS"] if app.startswith("devtools")]
    assert "apps.dashboard" in values["INSTALLED_APPS"]


def test_development_settings_install_the_devtools_unless_told_not_to(tmp_path):
    assert "devtools" in settings_in_subprocess(clean_env(tmp_path), ["INSTALLED_APPS"])["INSTALLED_APPS"]
    off = settings_in_subprocess(clean_env(tmp_path, GPUFINOPS_DEVTOOLS="0"), ["INSTALLED_APPS"])
    assert "devtools" not in off["INSTALLED_APPS"]
    on = settings_in_subprocess(clean_env(tmp_path, DEBUG="0", SECRET_KEY="p" * 64, GPUFINOPS_DEVTOOLS="1"),
                                ["INSTALLED_APPS"])
    assert "devtools" in on["INSTALLED_APPS"]
